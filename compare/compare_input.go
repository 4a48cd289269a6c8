package compare

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// Run is one measured run as compare and gate see it: run-level metrics by name, and, for
// traces, the per-message and per-token samples behind them.
type Run struct {
	Path    string               `json:"path"`
	Kind    string               `json:"kind"`             // "trace", "analyze", "venus-run", "baseline"
	Mode    string               `json:"mode,omitempty"`   // venusd mode or the trace's "mode" label
	Metrics map[string]float64   `json:"metrics"`          // by metric name (MetricInfo)
	Samples map[string][]float64 `json:"-"`                // "rtt_us", "send_us", "recv_us", "token_us", "rtt_us{cmd}"
	Lost    uint64               `json:"lost"`             // events the producers lost
	Damage  string               `json:"damage,omitempty"` // how a damaged or cut trace was recovered
	// PastHead counts, when the run's counts are lower bounds (analyze's CountsLowerBound), the
	// calls that ran past their captured payload heads with messages pipelined behind them or
	// some of them (analyze's calls_past_head, and calls_blind when replies answer requests not
	// seen); 0 otherwise
	PastHead uint64 `json:"calls_past_head,omitempty"`
	// CountsUpTo is, when PastHead is not 0, the most by which the counted metrics may fall
	// short, as a factor (1.0008: the true counts are at most 0.08% higher): from the bytes past
	// the heads, which can hold a few messages at most. nil: unknown, unbounded.
	CountsUpTo *float64         `json:"counts_up_to,omitempty"`
	Modes      []analyzers.Mode `json:"-"`
}

// VenusRunSchema is the schema of `perflab venus run --json`.
const VenusRunSchema = "perflab.venus.run/v1"

// BaselineSchema is the schema of a gate baseline file (`perflab gate --update`).
const BaselineSchema = "perflab.gate.baseline/v1"

// Baseline is a gate baseline: the runs a gate compares against, and whether they are ratios
// to reference runs measured alongside (perflab gate --relative-to).
type Baseline struct {
	Schema   string `json:"schema"`
	Relative bool   `json:"relative"`
	Runs     []Run  `json:"runs"`
}

// maxInputBytes bounds a JSON input file read whole (analyze json, venus run json, baselines).
const maxInputBytes = 256 << 20

// LoadRuns reads the runs in path: an analyze json, a venus run json (one object, or several as
// JSON lines), a gate baseline, or a trace (LoadTrace). It also reports whether the runs are
// ratios (a relative baseline). It names the file and what is wrong on error.
func LoadRuns(in protocol.Input, opt analyzers.Options) ([]Run, bool, error) {
	path := in.Name
	f, err := in.Open()
	if err != nil {
		return nil, false, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	head := make([]byte, 64)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if t := bytes.TrimLeft(head, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		r, err := LoadTrace(protocol.Resumed(path, head, f), opt)
		if err != nil {
			return nil, false, err
		}
		return []Run{r}, false, nil
	}
	data, err := io.ReadAll(io.LimitReader(io.MultiReader(bytes.NewReader(head), f), maxInputBytes+1))
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxInputBytes {
		return nil, false, fmt.Errorf("%s: larger than %d MiB", path, maxInputBytes>>20)
	}
	return parseRuns(path, data)
}

// parseRuns decodes one or more JSON objects (JSON lines) from data.
func parseRuns(path string, data []byte) ([]Run, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var runs []Run
	relative := false
	for i := 1; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			break
		} else if err != nil {
			return nil, false, fmt.Errorf("%s: object %d: %w", path, i, err)
		}
		var head struct {
			Schema string `json:"schema"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, false, fmt.Errorf("%s: object %d: %w", path, i, err)
		}
		name := path
		if i > 1 || dec.More() {
			name = fmt.Sprintf("%s#%d", path, i)
		}
		switch head.Schema {
		case analyzers.SummarySchema:
			var s analyzers.Summary
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, false, fmt.Errorf("%s: %w", name, err)
			}
			runs = append(runs, RunFromSummary(name, "analyze", &s))
		case VenusRunSchema:
			r, err := venusRun(name, raw)
			if err != nil {
				return nil, false, err
			}
			runs = append(runs, r)
		case BaselineSchema:
			var b Baseline
			if err := json.Unmarshal(raw, &b); err != nil {
				return nil, false, fmt.Errorf("%s: %w", name, err)
			}
			for j := range b.Runs {
				if b.Runs[j].Metrics == nil {
					return nil, false, fmt.Errorf("%s: run %d has no metrics", name, j+1)
				}
			}
			runs = append(runs, b.Runs...)
			relative = relative || b.Relative
		default:
			return nil, false, fmt.Errorf("%s: object %d: schema %q is none of %s, %s, %s", path, i, head.Schema, analyzers.SummarySchema, VenusRunSchema, BaselineSchema)
		}
	}
	if len(runs) == 0 {
		return nil, false, fmt.Errorf("%s: no runs", path)
	}
	return runs, relative, nil
}

// venusRun reads the fields of `perflab venus run --json` that compare and gate use.
func venusRun(name string, raw []byte) (Run, error) {
	var v struct {
		Mode       string   `json:"mode"`
		Tokens     float64  `json:"tokens"`
		TokensPerS *float64 `json:"tokens_per_s"`
		Lost       uint64   `json:"lost"`
		PerToken   struct {
			Frames     *float64 `json:"frames"`
			RoundTrips *float64 `json:"round_trips"`
			BytesSent  *float64 `json:"bytes_sent"`
			BytesRecv  *float64 `json:"bytes_recv"`
		} `json:"per_token"`
		RTT  *analyzers.Latency `json:"rtt_us"`
		Ping *struct {
			P50 float64 `json:"rtt_p50_us"`
			P99 float64 `json:"rtt_p99_us"`
		} `json:"ping"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return Run{}, fmt.Errorf("%s: %w", name, err)
	}
	if v.TokensPerS == nil && v.Ping == nil {
		return Run{}, fmt.Errorf("%s: no tokens_per_s", name)
	}
	r := Run{Path: name, Kind: "venus-run", Mode: v.Mode, Metrics: map[string]float64{}, Lost: v.Lost}
	set := func(k string, p *float64) {
		if p != nil {
			r.Metrics[k] = *p
		}
	}
	set(MetricTokensPerS, v.TokensPerS)
	set(MetricMessages, v.PerToken.Frames)
	set(MetricRoundTrips, v.PerToken.RoundTrips)
	set(MetricBytesSent, v.PerToken.BytesSent)
	set(MetricBytesRecv, v.PerToken.BytesRecv)
	if v.Ping != nil && v.Ping.P50 > 0 {
		r.Metrics[MetricRTTP50] = v.Ping.P50
		r.Metrics[MetricRTTP99] = v.Ping.P99
	}
	if v.RTT != nil && v.RTT.P50 > 0 {
		r.Metrics[MetricRTTP50] = v.RTT.P50
		r.Metrics[MetricRTTP90] = v.RTT.P90
		r.Metrics[MetricRTTP99] = v.RTT.P99
	}
	r.Metrics[MetricLost] = float64(v.Lost)
	return r, finite(r)
}

func finite(r Run) error {
	for k, v := range r.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s: metric %s is %g", r.Path, k, v)
		}
	}
	return nil
}

// Metric names shared by compare and gate (and by gate config files).
const (
	MetricTokensPerS = "tokens_per_s"
	// MetricRequestsPerS is, for a trace without units of work, the requests its client sent
	// (or its server received) per second of the trace: a lower bound when its counts are
	// (Run.PastHead)
	MetricRequestsPerS = "requests_per_s"
	MetricMessages     = "messages_per_token"
	MetricRoundTrips   = "round_trips_per_token"
	MetricBytesSent    = "bytes_sent_per_token"
	MetricBytesRecv    = "bytes_recv_per_token"
	MetricRTTP50       = "rtt_p50_us"
	MetricRTTP90       = "rtt_p90_us"
	MetricRTTP99       = "rtt_p99_us"
	MetricLost         = "lost"
)

// MetricInfo describes a metric: its unit, which way is better, and which per-message sample
// (and quantile) it summarises, when there is one.
type MetricInfo struct {
	Name   string
	Unit   string // "µs", "1/s", "msgs", "B"
	Higher bool   // higher is better
	Count  bool   // a count per unit: exact when every run of a side gives the same value
	// Whole is set for counts of messages per unit: every unit having the same count, a
	// single run gives a whole number, which is taken as exact (bytes per unit depend on the
	// data, so a single run says nothing of their spread).
	Whole    bool
	Sample   string  // sample key in Run.Samples, "" when none
	Quantile float64 // quantile of Sample the metric is; for tokens_per_s, of the token time
	// Rate: the metric is events per second and Sample the times between them (token times,
	// the gaps between requests); tests take their mean, inverted
	Rate bool
	// Counted: derived from counts of messages, which are lower bounds in a run whose messages
	// were pipelined past the captured payload heads (Run.PastHead)
	Counted bool
}

// Info returns what is known of metric name; names with a {command} or a direction prefix are
// latencies (lower is better).
func Info(name string) MetricInfo {
	switch name {
	case MetricTokensPerS:
		return MetricInfo{Name: name, Unit: "1/s", Higher: true, Sample: "token_us", Quantile: 0.5, Rate: true}
	case MetricRequestsPerS:
		return MetricInfo{Name: name, Unit: "1/s", Higher: true, Sample: "request_gap_us", Quantile: 0.5, Rate: true, Counted: true}
	case MetricMessages, MetricRoundTrips:
		return MetricInfo{Name: name, Unit: "", Count: true, Whole: true, Counted: true}
	case MetricBytesSent, MetricBytesRecv:
		return MetricInfo{Name: name, Unit: "B", Count: true}
	case MetricLost:
		return MetricInfo{Name: name, Count: true}
	}
	mi := MetricInfo{Name: name, Unit: "µs"}
	// <what>_p<NN>_us[{cmd}]
	base, cmd := name, ""
	if i := strings.IndexByte(name, '{'); i > 0 && strings.HasSuffix(name, "}") {
		base, cmd = name[:i], name[i:]
	}
	for _, q := range []struct {
		tag string
		q   float64
	}{{"_p50_us", 0.5}, {"_p90_us", 0.9}, {"_p99_us", 0.99}} {
		if strings.HasSuffix(base, q.tag) {
			mi.Sample = strings.TrimSuffix(base, q.tag) + "_us" + cmd
			mi.Quantile = q.q
		}
	}
	return mi
}

// RunFromSummary turns an analyze summary into a Run (without per-message samples).
func RunFromSummary(path, kind string, s *analyzers.Summary) Run {
	r := Run{Path: path, Kind: kind, Metrics: map[string]float64{}, Lost: s.Lost, Modes: s.Modes}
	if s.CountsLowerBound() {
		r.PastHead = s.CallsPastHead + s.CallsBlind
		r.CountsUpTo = countsUpTo(s)
	}
	for _, m := range s.Meta {
		if v := m.Labels["mode"]; v != "" {
			r.Mode = v
		}
	}
	if s.Recovery != nil && s.Recovery.Damaged() {
		r.Damage = s.Recovery.String()
	}
	var u *analyzers.UnitStats
	for i := range s.Units {
		if s.Units[i].Name == "token" || u == nil {
			u = &s.Units[i]
		}
	}
	if u != nil && u.Count > 0 {
		r.Metrics[MetricTokensPerS] = u.UnitsPerS
		r.Metrics[MetricMessages] = u.MessagesPerUnit
		r.Metrics[MetricRoundTrips] = u.RoundTripsPerUnit
		r.Metrics[MetricBytesSent] = u.BytesSentPerUnit
		r.Metrics[MetricBytesRecv] = u.BytesRecvPerUnit
	}
	if n := requests(s); u == nil && n > 1 && s.Duration > 0 {
		r.Metrics[MetricRequestsPerS] = float64(n) / s.Duration
	}
	if s.RoundTrips.Count > 0 {
		r.Metrics[MetricRTTP50] = s.RoundTrips.RTTUS.P50
		r.Metrics[MetricRTTP90] = s.RoundTrips.RTTUS.P90
		r.Metrics[MetricRTTP99] = s.RoundTrips.RTTUS.P99
	}
	// Per direction: the connection that carried the most calls speaks for the run.
	var busiest *analyzers.ConnStats
	for i := range s.Connections {
		c := &s.Connections[i]
		if busiest == nil || c.Send.Calls+c.Recv.Calls > busiest.Send.Calls+busiest.Recv.Calls {
			busiest = c
		}
	}
	if busiest != nil {
		for _, d := range []struct {
			name string
			st   analyzers.DirStats
		}{{"send", busiest.Send}, {"recv", busiest.Recv}} {
			if d.st.Calls > 0 {
				r.Metrics[d.name+"_p50_us"] = d.st.LatencyUS.P50
				r.Metrics[d.name+"_p99_us"] = d.st.LatencyUS.P99
			}
		}
	}
	for _, c := range s.Commands {
		if c.RTTUS != nil && c.Count > 0 {
			r.Metrics["rtt_p50_us{"+c.Name+"}"] = c.RTTUS.P50
			r.Metrics["rtt_p99_us{"+c.Name+"}"] = c.RTTUS.P99
		}
	}
	r.Metrics[MetricLost] = float64(s.Lost)
	return r
}

// minValueBytes is the fewest bytes a RESP value takes ("+\r\n").
const minValueBytes = 3

// countsUpTo bounds how far short of the truth the counts of a summary whose counts are lower
// bounds may be, as a factor: the values past the heads fit in their bytes, at most
// BytesPastHead/3 of them, and each could be a request, a reply or a round trip of its own
// (against the least of those counts). nil when text-protocol messages past the heads make the
// counts lower bounds: their bytes are not known.
func countsUpTo(s *analyzers.Summary) *float64 {
	if s.CallsBlind > 0 && s.RoundTrips.Unpaired > 0 {
		return nil
	}
	least := min(requests(s), s.RoundTrips.Count)
	if least == 0 {
		return nil
	}
	f := 1 + float64(s.BytesPastHead/minValueBytes)/float64(least)
	return &f
}

// requests counts a trace's requests in the direction that has more of them: what its clients
// sent (send) or its servers received (recv); a trace of both counts each request once.
func requests(s *analyzers.Summary) uint64 {
	n := requestsDir(s)
	return max(n[trace.DirSend], n[trace.DirRecv])
}

func requestsDir(s *analyzers.Summary) (n [3]uint64) {
	for _, c := range s.Commands {
		if c.Kind == "request" {
			switch c.Direction {
			case "send":
				n[trace.DirSend] += c.Count
			case "recv":
				n[trace.DirRecv] += c.Count
			}
		}
	}
	return n
}

// MarshalBaseline encodes runs as a gate baseline (indented JSON, one run per entry, metrics in
// name order), the file `perflab gate --update` writes.
func MarshalBaseline(runs []Run, relative bool) ([]byte, error) {
	b := Baseline{Schema: BaselineSchema, Relative: relative, Runs: make([]Run, len(runs))}
	for i, r := range runs {
		b.Runs[i] = Run{Path: r.Path, Kind: r.Kind, Mode: r.Mode, Metrics: r.Metrics, Lost: r.Lost, PastHead: r.PastHead, CountsUpTo: r.CountsUpTo}
	}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(b); err != nil {
		return nil, fmt.Errorf("encode baseline: %w", err)
	}
	w.Flush()
	return buf.Bytes(), nil
}

// Ratios pairs runs with refs by position and returns, for each pair, a run whose metrics are
// run/ref: the ratio measured in one session (A B A B), which cancels the machine's speed. Lost
// counts add up. Metrics missing on either side, or 0 in ref, are dropped.
func Ratios(runs, refs []Run) ([]Run, error) {
	if len(runs) != len(refs) {
		return nil, fmt.Errorf("%d runs but %d reference runs: pair them one to one", len(runs), len(refs))
	}
	out := make([]Run, len(runs))
	for i := range runs {
		r := Run{Path: runs[i].Path + "/" + refs[i].Path, Kind: runs[i].Kind, Mode: runs[i].Mode,
			Metrics: map[string]float64{}, Lost: runs[i].Lost + refs[i].Lost, PastHead: runs[i].PastHead + refs[i].PastHead}
		keys := make([]string, 0, len(runs[i].Metrics))
		for k := range runs[i].Metrics {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == MetricLost {
				continue
			}
			if d, ok := refs[i].Metrics[k]; ok && d != 0 {
				r.Metrics[k] = runs[i].Metrics[k] / d
			}
		}
		r.Metrics[MetricLost] = float64(r.Lost)
		if runs[i].Damage != "" || refs[i].Damage != "" {
			r.Damage = strings.TrimSpace(runs[i].Damage + " " + refs[i].Damage)
		}
		out[i] = r
	}
	return out, nil
}
