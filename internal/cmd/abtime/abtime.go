package main

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"
)

// sample is one finished run: wall and CPU time in seconds, peak RSS in KiB.
type sample struct {
	wall, cpu float64
	peakKiB   int64
}

// run times a (and b when vs is not empty) n times each, alternated, and writes the report to w.
func run(w io.Writer, n int, vs string, a []string) error {
	if n < 1 || n > 100 {
		return fmt.Errorf("-n %d out of range (1-100)", n)
	}
	if len(a) == 0 {
		return errors.New("no command given (usage: abtime [-n RUNS] [-vs 'B'] -- A...)")
	}
	var b []string
	if vs != "" {
		var err error
		if b, err = splitWords(vs); err != nil {
			return fmt.Errorf("parse -vs: %w", err)
		}
	}
	cmds := [][]string{a}
	if len(b) > 0 {
		cmds = append(cmds, b)
	}
	for _, c := range cmds { // one warm-up run each, not counted
		if _, err := once(c); err != nil {
			return err
		}
	}
	runs := make([][]sample, len(cmds))
	for i := 0; i < n; i++ {
		for j, c := range cmds {
			s, err := once(c)
			if err != nil {
				return err
			}
			runs[j] = append(runs[j], s)
		}
	}
	names := []string{"A", "B"}
	for j, c := range cmds {
		fmt.Fprintf(w, "%s: %s\n", names[j], strings.Join(c, " "))
		writeSpread(w, "  wall s ", field(runs[j], func(s sample) float64 { return s.wall }), "%.3f")
		writeSpread(w, "  cpu s  ", field(runs[j], func(s sample) float64 { return s.cpu }), "%.3f")
		writeSpread(w, "  peak MiB", field(runs[j], func(s sample) float64 { return float64(s.peakKiB) / 1024 }), "%.1f")
	}
	if len(cmds) == 2 {
		fmt.Fprintln(w, "A/B, pair by pair:")
		writeSpread(w, "  wall    ", ratios(runs, func(s sample) float64 { return s.wall }), "%.3f")
		writeSpread(w, "  cpu     ", ratios(runs, func(s sample) float64 { return s.cpu }), "%.3f")
		writeSpread(w, "  peak    ", ratios(runs, func(s sample) float64 { return float64(s.peakKiB) }), "%.3f")
	}
	return nil
}

// once runs c to its end and returns its times; a non-zero exit is an error naming the command.
func once(c []string) (sample, error) {
	cmd := exec.Command(c[0], c[1:]...)
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start).Seconds()
	if err != nil {
		return sample{}, fmt.Errorf("run %s: %w", strings.Join(c, " "), err)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return sample{}, fmt.Errorf("run %s: no resource usage on this system", c[0])
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	return sample{wall: wall, cpu: cpu, peakKiB: ru.Maxrss}, nil
}

func field(s []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(s))
	for i, x := range s {
		out[i] = f(x)
	}
	return out
}

// ratios returns A/B of field f for each pair of runs.
func ratios(runs [][]sample, f func(sample) float64) []float64 {
	var out []float64
	for i := range runs[0] {
		if d := f(runs[1][i]); d > 0 {
			out = append(out, f(runs[0][i])/d)
		}
	}
	return out
}

// writeSpread writes min, median and max of v; the median of an even count is the mean of
// the two middle values.
func writeSpread(w io.Writer, name string, v []float64, format string) {
	if len(v) == 0 {
		fmt.Fprintf(w, "%s  -\n", name)
		return
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	f := "%s  min " + format + "  median " + format + "  max " + format + "\n"
	fmt.Fprintf(w, f, name, s[0], med, s[len(s)-1])
}

// splitWords splits s into words at unquoted spaces; single and double quotes group words
// and are removed, as a shell would (no escapes, variables or globbing).
func splitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated %c quote in %q", quote, s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command %q", s)
	}
	return words, nil
}
