package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/perflab/perflab/merge"
	"github.com/perflab/perflab/trace"
)

func init() {
	c := &Command{
		Name:    "merge",
		Summary: "put recordings of one system from several hosts on one timeline: match connections and messages, bound clock offset and drift (docs/merge.md)",
		Usage:   "-o FILE [--json] TRACE TRACE...",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runMerge(env, c, args) }
	Register(c)
}

func runMerge(env *Env, c *Command, args []string) error {
	fs := NewFlagSet(env, c)
	out := fs.String("o", "", "write the merged trace to `FILE` (required)")
	asJSON := fs.Bool("json", false, "print the clock placements as JSON (the merged trace's meta.clocks) instead of a table")
	paths, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if *out == "" {
		return BadInput("-o FILE is required (usage: perflab merge %s)", c.Usage)
	}
	if len(paths) < 2 {
		return BadInput("want at least two traces (usage: perflab merge %s)", c.Usage)
	}
	inputs := make([]merge.Input, len(paths))
	for i, p := range paths {
		if abs, err1 := filepath.Abs(p); err1 == nil {
			if absOut, err2 := filepath.Abs(*out); err2 == nil && abs == absOut {
				return BadInput("-o %s: is also an input", *out)
			}
		}
		f, err := readTraceFile(p)
		if err != nil {
			return exportReadError(p, err)
		}
		if f.Recovery.Damaged() {
			fmt.Fprintf(env.Stderr, "perflab merge: warning: %s is damaged or cut, merged what could be read: %v\n", p, f.Recovery)
		}
		inputs[i] = merge.Input{Name: p, File: f}
	}
	res, err := merge.Place(inputs)
	if err != nil {
		var me *merge.Error
		if errors.As(err, &me) {
			return BadInput("merge %s: %v", me.Input, me.Err)
		}
		return BadInput("merge: %v", err)
	}
	tmp := *out + ".tmp"
	err = res.Write(func(m trace.Meta) (*trace.Writer, error) { return trace.Create(tmp, m, nil) })
	if err == nil {
		err = os.Rename(tmp, *out)
	}
	if err != nil {
		os.Remove(tmp)
		var pe *os.PathError
		if errors.As(err, &pe) {
			return BadInput("create %s: %v", *out, pe.Err)
		}
		return fmt.Errorf("merge: %w", err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(env.Stderr, "perflab merge: warning: %s\n", w)
	}
	clocks := res.Clocks()
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Output   string        `json:"output"`
			Clocks   []trace.Clock `json:"clocks"`
			Warnings []string      `json:"warnings"`
		}{*out, clocks, append([]string{}, res.Warnings...)})
	}
	fmt.Fprintf(env.Stdout, "%-4s %-28s %-14s %-32s %-34s %s\n", "in", "trace", "host", "offset ns [lo, hi]", "drift ppm [lo, hi]", "messages")
	for i, k := range clocks {
		if i == 0 {
			fmt.Fprintf(env.Stdout, "%-4d %-28s %-14s %-32s %-34s %s\n", i, k.Input, k.Host, "reference", "reference", "-")
			continue
		}
		fmt.Fprintf(env.Stdout, "%-4d %-28s %-14s %-32s %-34s %d (against input %d)\n", i, k.Input, k.Host,
			fmt.Sprintf("%d [%d, %d]", k.OffsetNS, k.OffsetLoNS, k.OffsetHiNS),
			fmt.Sprintf("%.2f [%.2f, %.2f]", k.DriftPPM, k.DriftLoPPM, k.DriftHiPPM), k.Messages, k.Peer)
	}
	fmt.Fprintf(env.Stdout, "wrote %s\n", *out)
	return nil
}
