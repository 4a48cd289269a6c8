package compare

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// maxSamplesPerKind bounds the per-message samples kept of one kind from one trace (the first
// ones), so that memory does not grow with the trace; 200k samples pin a p99 well.
const maxSamplesPerKind = 200_000

// LoadTrace analyses the trace at path and returns it as a Run: the summary's metrics, plus
// samples for tests: "rtt_us" (and "rtt_us{command}") from paired replies, "send_us" and
// "recv_us" from frame durations, and "token_us" from the token markers' spans (or the time
// between instant markers).
func LoadTrace(path string, opt analyzers.Options) (Run, error) {
	s, err := analyzers.Analyze([]string{path}, opt)
	if err != nil {
		return Run{}, err
	}
	r := RunFromSummary(path, "trace", s)
	r.Samples = map[string][]float64{}
	add := func(k string, v float64) {
		if len(r.Samples[k]) < maxSamplesPerKind {
			r.Samples[k] = append(r.Samples[k], v)
		}
	}
	err = analyzers.Messages([]string{path}, opt, func(m *protocol.Message) error {
		if m.Truncated {
			return nil
		}
		d := "send_us"
		if m.Dir == trace.DirRecv {
			d = "recv_us"
		}
		add(d, float64(m.Duration())/1e3)
		if m.IsReply && m.RTT > 0 {
			add("rtt_us", float64(m.RTT)/1e3)
			if m.Name != "" {
				add("rtt_us{"+m.Name+"}", float64(m.RTT)/1e3)
			}
		}
		return nil
	})
	if err != nil {
		return Run{}, err
	}
	tok, err := tokenTimes(path, opt.Unit)
	if err != nil {
		return Run{}, err
	}
	if len(tok) > 0 {
		r.Samples["token_us"] = tok
	}
	for k, v := range r.Samples {
		if len(v) == 0 {
			delete(r.Samples, k)
		}
	}
	return r, nil
}

// tokenTimes returns the duration of each unit marker (name unit, default "token") in µs: its
// span, or for instant markers the time since the previous one.
func tokenTimes(path, unit string) ([]float64, error) {
	if unit == "" {
		unit = "token"
	}
	var out []float64
	var lastTS int64
	var haveLast bool
	err := eachMarker(path, func(m *trace.Marker) {
		if m.Name != unit || len(out) >= maxSamplesPerKind {
			return
		}
		switch {
		case m.Dur > 0:
			out = append(out, float64(m.Dur)/1e3)
		case haveLast && m.TS > lastTS:
			out = append(out, float64(m.TS-lastTS)/1e3)
		}
		lastTS, haveLast = m.TS, true
	})
	return out, err
}

// eachMarker calls fn with every marker of the trace at path.
func eachMarker(path string, fn func(*trace.Marker)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	rd, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	var rec trace.Record
	for {
		err := rd.Next(&rec)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if rec.Kind == trace.KindMarker {
			fn(&rec.Marker)
		}
	}
}

// readMeta returns the metadata of the trace at path.
func readMeta(path string) (trace.Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return trace.Meta{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	rd, err := trace.NewReader(bufio.NewReader(f))
	if err != nil {
		return trace.Meta{}, fmt.Errorf("read %s: %w", path, err)
	}
	return rd.Meta(), nil
}
