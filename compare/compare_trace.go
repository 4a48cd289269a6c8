package compare

import (
	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// maxSamplesPerKind bounds the per-message samples kept of one kind from one trace (the first
// ones), so that memory does not grow with the trace; 200k samples pin a p99 well.
const maxSamplesPerKind = 200_000

// LoadTrace analyses the trace in and returns it as a Run: the summary's metrics, plus samples
// for tests: "rtt_us" (and "rtt_us{command}") from paired replies, "send_us" and "recv_us" from
// frame durations, "token_us" from the token markers' spans (or the time between instant
// markers), and "request_gap_us", the times between the requests of the direction that has
// more (its requests_per_s inverted), when the run has that metric. The trace is read once:
// the samples come from the analysis's own pass.
func LoadTrace(in protocol.Input, opt analyzers.Options) (Run, error) {
	sm := &sampler{samples: map[string][]float64{}, tokens: tokenTimer{unit: opt.Unit}}
	s, err := analyzers.AnalyzeVisit([]protocol.Input{in}, opt, sm)
	if err != nil {
		return Run{}, err
	}
	r := RunFromSummary(in.Name, "trace", s)
	r.Samples = sm.samples
	if len(sm.tokens.out) > 0 {
		r.Samples["token_us"] = sm.tokens.out
	}
	if _, ok := r.Metrics[MetricRequestsPerS]; ok {
		d := trace.DirSend
		if n := requestsDir(s); n[trace.DirRecv] > n[trace.DirSend] {
			d = trace.DirRecv
		}
		r.Samples["request_gap_us"] = sm.gaps[d].out
	}
	for k, v := range r.Samples {
		if len(v) == 0 {
			delete(r.Samples, k)
		}
	}
	return r, nil
}

// sampler keeps, from one pass over a trace, the per-message samples (the first
// maxSamplesPerKind of each kind) and the unit times.
type sampler struct {
	samples map[string][]float64
	tokens  tokenTimer
	gaps    [3]gapTimer // the times between requests, per direction
}

// gapTimer gathers the times between consecutive events, µs; the first maxSamplesPerKind.
type gapTimer struct {
	out      []float64
	last     int64
	haveLast bool
}

func (g *gapTimer) at(ts int64) {
	if g.haveLast && ts >= g.last && len(g.out) < maxSamplesPerKind {
		g.out = append(g.out, float64(ts-g.last)/1e3)
	}
	g.last, g.haveLast = ts, true
}

func (sm *sampler) add(k string, v float64) {
	if len(sm.samples[k]) < maxSamplesPerKind {
		sm.samples[k] = append(sm.samples[k], v)
	}
}

func (sm *sampler) Begin(int, string, trace.Meta) {}
func (sm *sampler) End(int, trace.Recovery)       {}

func (sm *sampler) Answered(*protocol.Message, protocol.Answered) {}

func (sm *sampler) Record(rec *trace.Record) {
	if rec.Kind == trace.KindMarker {
		sm.tokens.marker(&rec.Marker)
	}
}

func (sm *sampler) Message(m *protocol.Message) {
	if m.Truncated {
		return
	}
	d := "send_us"
	if m.Dir == trace.DirRecv {
		d = "recv_us"
	}
	sm.add(d, float64(m.Duration())/1e3)
	if !m.IsReply && int(m.Dir) < len(sm.gaps) {
		sm.gaps[m.Dir].at(m.TS)
	}
	if m.IsReply && m.RTT > 0 {
		sm.add("rtt_us", float64(m.RTT)/1e3)
		if m.Name != "" {
			sm.add("rtt_us{"+m.Name+"}", float64(m.RTT)/1e3)
		}
	}
}

// tokenTimer gathers the duration of each unit marker (name unit, default "token") in µs: its
// span, or for instant markers the time since the previous one; the first maxSamplesPerKind.
type tokenTimer struct {
	unit     string
	out      []float64
	lastTS   int64
	haveLast bool
}

func (tt *tokenTimer) marker(m *trace.Marker) {
	unit := tt.unit
	if unit == "" {
		unit = "token"
	}
	if m.Name != unit || len(tt.out) >= maxSamplesPerKind {
		return
	}
	switch {
	case m.Dur > 0:
		tt.out = append(tt.out, float64(m.Dur)/1e3)
	case tt.haveLast && m.TS > tt.lastTS:
		tt.out = append(tt.out, float64(m.TS-tt.lastTS)/1e3)
	}
	tt.lastTS, tt.haveLast = m.TS, true
}
