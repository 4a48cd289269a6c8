package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/perflab/perflab/export"
	"github.com/perflab/perflab/trace"
)

// An exportFunc writes the trace at path to w in one format. It returns the trace's Recovery as
// its reader reported it, so that export can warn when the trace was damaged or cut (a format
// that does not read with a trace.Reader returns trace.Recovery{Clean: true}). Errors about the
// file should be, or wrap, a *trace.FormatError so that export names the offset.
type exportFunc func(w io.Writer, path string) (trace.Recovery, error)

// exportFormats maps --format names to their exporters. Formats register from init with
// registerExport, each in its own file.
var exportFormats = map[string]exportFunc{}

// registerExport adds an export format.
func registerExport(name string, fn exportFunc) {
	if _, dup := exportFormats[name]; dup {
		panic("cli: export format registered twice: " + name)
	}
	exportFormats[name] = fn
}

// streamExport adapts a streaming exporter of the export package to an exportFunc. The trace is
// opened once, through openInputFile.
func streamExport(fn func(w io.Writer, tr *trace.Reader) error) exportFunc {
	return func(w io.Writer, path string) (trace.Recovery, error) {
		f, err := openInputFile(path)
		if err != nil {
			return trace.Recovery{}, err
		}
		defer f.Close()
		if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
			if fi, err := st.Stat(); err == nil && fi.IsDir() {
				return trace.Recovery{}, &trace.FormatError{Offset: 0, Msg: "is a directory, not a trace file"}
			}
		}
		tr, err := trace.NewReader(f)
		if err != nil {
			return trace.Recovery{}, err
		}
		if err := fn(w, tr); err != nil {
			return tr.Recovery(), err
		}
		return tr.Recovery(), nil
	}
}

func exportNames() string {
	var names []string
	for n := range exportFormats {
		names = append(names, n)
	}
	for n := range dirExportFormats {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func init() {
	registerExport("jsonl", streamExport(export.JSONL))
	registerExport("csv", streamExport(export.CSV))
	c := &Command{
		Name:    "export",
		Summary: "write a trace's records as JSON lines or CSV (docs/trace-format.md), or another registered format (docs/export.md)",
		Usage:   "--format jsonl|csv|perfetto|perfetto-proto|pprof|parquet [-o FILE|DIR] [--protocol P] [--label K=V]... TRACE...",
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runExport(env, c, args) }
	Register(c)
}

func runExport(env *Env, c *Command, args []string) error {
	fs := NewFlagSet(env, c)
	format := fs.String("format", "jsonl", "output `format`: "+exportNames())
	out := fs.String("o", "", "write to `FILE` instead of stdout (parquet: the `DIR` of its tables)")
	dx := dirExportFlags(fs)
	paths, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if fn, ok := dirExportFormats[*format]; ok {
		return runDirExport(env, c, fn, *out, paths, dx)
	}
	if err := dx.onlyForDir(); err != nil {
		return err
	}
	if len(paths) != 1 {
		return BadInput("want exactly one trace (usage: perflab export %s)", c.Usage)
	}
	fn, ok := exportFormats[*format]
	if !ok {
		return BadInput("--format %q unknown (want %s)", *format, exportNames())
	}
	path := paths[0]
	var w io.Writer = env.Stdout
	var lf *exportLazyFile
	if *out != "" {
		// Created on the first byte written, so that a bad trace leaves no empty file behind.
		lf = &exportLazyFile{path: *out}
		w = lf
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	rec, err := fn(bw, path)
	if err == nil {
		err = bw.Flush()
	}
	if lf != nil {
		if cerr := lf.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	if err != nil {
		var ce *exportCreateError
		if errors.As(err, &ce) {
			return BadInput("create %s: %v", ce.path, exportUnwrapPath(ce.err))
		}
		var fe *trace.FormatError
		var pe *os.PathError
		if errors.As(err, &fe) || errors.As(err, &pe) && pe.Path == path {
			return exportReadError(path, err)
		}
		return fmt.Errorf("export %s: %w", path, err)
	}
	if rec.Damaged() {
		fmt.Fprintf(env.Stderr, "perflab export: warning: %s is damaged or cut, exported what could be read: %v\n", path, rec)
	}
	return nil
}

// exportReadError turns an error opening or reading a trace into one line of bad input:
// "read FILE: offset N: what".
func exportReadError(path string, err error) error {
	return BadInput("read %s: %v", path, exportUnwrapPath(err))
}

// exportUnwrapPath drops the *os.PathError wrapper, whose message repeats the path.
func exportUnwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// exportLazyFile creates its file on the first Write.
type exportLazyFile struct {
	path string
	f    *os.File
}

// exportCreateError is a failure to create the output file.
type exportCreateError struct {
	path string
	err  error
}

func (e *exportCreateError) Error() string { return fmt.Sprintf("create %s: %v", e.path, e.err) }
func (e *exportCreateError) Unwrap() error { return e.err }

func (l *exportLazyFile) Write(p []byte) (int, error) {
	if l.f == nil {
		f, err := os.Create(l.path)
		if err != nil {
			return 0, &exportCreateError{l.path, err}
		}
		l.f = f
	}
	return l.f.Write(p)
}

func (l *exportLazyFile) Close() error {
	if l.f == nil {
		return nil
	}
	return l.f.Close()
}
