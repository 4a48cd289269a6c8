package compare

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// This file builds the what-if model of a token loop (models.Loop) from a baseline trace, for
// `perflab model --from TRACE`: the calls of a token with their kinds and sizes, and the costs
// (compute, send, per-message latency, per-byte, per-call work) that reproduce the measured
// token time.

// callKind returns the kind of the call named name by the classes of spec (nil: async).
func callKind(spec *protocol.Spec, name string) models.CallKind {
	if spec == nil {
		return models.Async
	}
	switch spec.CallClass(name) {
	case protocol.ClassSubmit:
		return models.Submit
	case protocol.ClassSync:
		return models.Sync
	}
	return models.Async
}

// classNote says how the calls were classed: by the names spec gives.
func classNote(spec *protocol.Spec) string {
	if spec == nil || len(spec.SubmitCommands)+len(spec.SyncCommands) == 0 {
		name := "the trace's"
		if spec != nil {
			name = spec.Name
		}
		return "calls are classified by the protocol spec's submit_commands and sync_commands, and " + name + " names none"
	}
	return "calls are classified by name: submits (" + strings.Join(spec.SubmitCommands, ", ") + "), sync points (" +
		strings.Join(spec.SyncCommands, ", ") + "), the rest async; a sync call followed by another travels with it when coalesced"
}

// DefaultPipelineHopUS is the client's cost of one pipelined reply, µs: a receive goroutine
// reads it and hands it over through a channel, a wake-up the baseline never pays, so a
// baseline trace cannot show it. A hand-over to a thread on the same vCPU costs a few µs, one to
// a halted vCPU about 28 µs on the 2-vCPU VM of docs/models.md (venusd's BenchmarkSmallRoundTrip,
// pinned placements); 21 µs is the value that fits venusd's pipelined modes at 0, 1 and 5 ms of
// link delay there (docs/models.md, "Validation against venusd").
const DefaultPipelineHopUS = 21

// maxModelTokens bounds the tokens FitLoop keeps in memory (their calls): enough for stable
// medians, and memory that does not grow with a long recording.
const maxModelTokens = 10000

// smallRequest is the largest request, in bytes, counted as a control command when the model
// looks for the cheapest command: its round trip is almost all per-message latency.
const smallRequest = 4096

// venusFrameBytes is the framing of a Venus frame: the 8-byte header.
const venusFrameBytes = 8

// LoopFit is a token loop calibrated from a baseline trace, with what was measured.
type LoopFit struct {
	Loop     models.Loop
	Measured models.Prediction // the baseline as measured (per token)
	Tokens   int               // tokens whose calls were used
	Calls    []string          // call names of the representative token
	Notes    []string          // assumptions and what was estimated how
}

// FitLoop calibrates a token loop from the baseline trace in, in which every call was one
// synchronous round trip. linkRTTUS is the link's round-trip latency during the recording (µs;
// a negative value means: read venusd's --delay from the trace's command line, else 0), and
// bandwidth its bytes/s (0: unlimited). The trace is read once.
func FitLoop(in protocol.Input, opt analyzers.Options, linkRTTUS, bandwidth float64) (*LoopFit, error) {
	lv := NewLoopVisitor(in.Name, opt)
	if err := analyzers.Visit([]protocol.Input{in}, opt, lv); err != nil {
		return nil, err
	}
	return lv.Fit(linkRTTUS, bandwidth)
}

// LoopVisitor gathers from one pass over a trace what FitLoop calibrates a token loop from, for
// a verb that feeds the same pass to other visitors too (protocol.Tee).
type LoopVisitor struct {
	loopTrace
	path string
}

// NewLoopVisitor returns the LoopVisitor of the trace named path, decoded with opt.
func NewLoopVisitor(path string, opt analyzers.Options) *LoopVisitor {
	lv := &LoopVisitor{loopTrace{unit: opt.Unit, byReq: map[[2]uint64]*loopCall{}}, path}
	if lv.unit == "" {
		lv.unit = "token"
	}
	return lv
}

// Fit calibrates the token loop from what the pass gathered, as FitLoop does.
func (lv *LoopVisitor) Fit(linkRTTUS, bandwidth float64) (*LoopFit, error) {
	path, lt := lv.path, &lv.loopTrace
	spans := lt.spans
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	if len(spans) == 0 {
		return nil, fmt.Errorf("%s: no token markers: the model needs a trace of a token loop", path)
	}
	fit := &LoopFit{}
	if len(spans) > maxModelTokens {
		fit.Notes = append(fit.Notes, fmt.Sprintf("the first %d of %d tokens were used", maxModelTokens, len(spans)))
		spans = spans[:maxModelTokens]
	}
	if linkRTTUS < 0 {
		linkRTTUS = 0
		if d, ok := delayFromMeta(lt.meta); ok {
			linkRTTUS = 2 * d
			fit.Notes = append(fit.Notes, fmt.Sprintf("link: venusd --delay %s each way, from the trace's command line", fmtUS(d)))
		}
	}
	tokens := lt.tokens(spans)
	spec := lt.spec
	use := representative(tokens)
	if len(use) == 0 {
		return nil, fmt.Errorf("%s: no token has every call answered: is it a baseline (one round trip per call) trace?", path)
	}
	n := len(tokens[use[0]])
	l := models.Loop{Calls: make([]models.Call, n), FrameBytes: venusFrameBytes, Link: models.Link{Name: "measured", RTTUS: linkRTTUS, BandwidthBps: bandwidth}}
	tokenUS, blocked, sendX, sendY := averageCalls(&l, tokens, use, spans, spec)
	if !classed(l.Calls) {
		// No call is a known submit or sync point (not a Vulkan loop): every call is taken to
		// need its result, so neither coalescing nor pipelining can change anything.
		for i := range l.Calls {
			l.Calls[i].Kind = models.Sync
			l.Calls[i].JoinNext = false
		}
		fit.Notes = append(fit.Notes, "no call is a known submit or sync point: every call is treated as one whose result is needed at once, so coalescing and pipelining predict no change")
	}
	// Send cost: a line through (frame bytes, write time).
	if b, _, err := models.FitBatch(sendX, sendY); err == nil && b.TFixedUS >= 0 && b.TPerReqUS >= 0 {
		l.SendUS, l.SendPerByteUS = b.TFixedUS, b.TPerReqUS
	} else {
		l.SendUS = mean(sendY)
	}
	if excess := splitCosts(&l, tokens, use, linkRTTUS); linkRTTUS <= 0 {
		fit.Notes = append(fit.Notes, fmt.Sprintf("no link delay: the %s a round trip spends beyond its minimum counts as serial CPU time, not latency", fmtUS(excess)))
	}
	l.PipelineHopUS = DefaultPipelineHopUS
	l.ComputeUS = math.Max(0, tokenUS-blocked)
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	fit.Loop = l
	fit.Tokens = len(use)
	for _, c := range l.Calls {
		fit.Calls = append(fit.Calls, c.Name)
	}
	var sent, recv float64
	for _, c := range l.Calls {
		sent += c.SendBytes + venusFrameBytes
		recv += c.RecvBytes + venusFrameBytes
	}
	fit.Measured = models.Prediction{MessagesPerToken: 2 * float64(n), RoundTripsPerToken: float64(n), WaitsPerToken: float64(n),
		BytesSentPerToken: sent, BytesRecvPerToken: recv, NetWaitUS: blocked, TokenTimeUS: tokenUS, TokensPerS: 1e6 / tokenUS}
	fit.Notes = append(fit.Notes,
		fmt.Sprintf("%d of %d tokens share the most common call sequence (%d calls); the model replays it", len(use), len(spans), n),
		fmt.Sprintf("compute between calls: %s per token (token time minus the round trips), spread evenly before the calls", fmtUS(l.ComputeUS)),
		fmt.Sprintf("writing a frame: %s + %.3g µs/byte; every frame costs %s of serial messaging work and %s of latency that pipelining can overlap", fmtUS(l.SendUS), l.SendPerByteUS, fmtUS(l.MessageCPUUS), fmtUS(l.MessageUS)),
		fmt.Sprintf("serial work per call: a call's 10th-percentile round trip, less its send and the link, above the cheapest control call's (%s)", workSummary(l.Calls)),
		fmt.Sprintf("a pipelined reply costs the client %s (a receive thread's hand-over; not visible in a baseline)", fmtUS(l.PipelineHopUS)),
		classNote(spec))
	return fit, nil
}

// representative returns the tokens that make the representative token: those whose calls
// were all answered and follow the most common sequence of call names (ties: the sequence
// first by name); none when no token has every call answered. Incomplete tokens are set to nil.
func representative(tokens [][]*loopCall) []int {
	count := map[string]int{}
	for t, cs := range tokens {
		if len(cs) == 0 || !allDone(cs, func(c *loopCall) bool { return c.done }) {
			tokens[t] = nil
			continue
		}
		count[signature(cs, func(c *loopCall) string { return c.name })]++
	}
	best, bestN := "", 0
	for s, n := range count {
		if n > bestN || (n == bestN && s < best) {
			best, bestN = s, n
		}
	}
	if bestN == 0 {
		return nil
	}
	var use []int
	for t, cs := range tokens {
		if cs != nil && signature(cs, func(c *loopCall) string { return c.name }) == best {
			use = append(use, t)
		}
	}
	return use
}

// averageCalls fills l's calls with the names, kinds and mean bytes of the tokens in use, and
// returns the mean token time and time blocked on round trips (µs), and the (frame bytes,
// write time) of every request, for the send cost's fit.
func averageCalls(l *models.Loop, tokens [][]*loopCall, use []int, spans [][2]int64, spec *protocol.Spec) (tokenUS, blocked float64, sendX, sendY []float64) {
	n := len(l.Calls)
	meanRTT := make([]float64, n)
	for _, t := range use {
		tokenUS += float64(spans[t][1]-spans[t][0]) / 1e3
		for i, c := range tokens[t] {
			l.Calls[i].SendBytes += c.send
			l.Calls[i].RecvBytes += c.recv
			meanRTT[i] += c.rttUS
			sendX, sendY = append(sendX, c.send+venusFrameBytes), append(sendY, c.sendUS)
		}
	}
	k := float64(len(use))
	tokenUS /= k
	for i := range l.Calls {
		c := &l.Calls[i]
		c.Name = tokens[use[0]][i].name
		c.Kind = callKind(spec, c.Name)
		c.SendBytes /= k
		c.RecvBytes /= k
		meanRTT[i] /= k
		blocked += meanRTT[i]
		if c.Kind == models.Sync && i+1 < n && callKind(spec, tokens[use[0]][i+1].name) == models.Sync {
			c.JoinNext = true
		}
	}
	return tokenUS, blocked, sendX, sendY
}

// classed reports whether any call is a known submit or sync point.
func classed(calls []models.Call) bool {
	for _, c := range calls {
		if c.Kind != models.Async {
			return true
		}
	}
	return false
}

// splitCosts splits what a round trip spends beyond the send and the link into serial costs
// and latency, and returns the excess (µs) it could not place as work: latency with a link
// delay (l.MessageUS), serial work added to every call without. A call's lowest cost over the
// tokens (its 10th percentile) is taken as unavoidable CPU work; the cheapest control call's (a
// request of at most smallRequest bytes) is the messaging cost every frame pays, and a call's
// cost above it is the call's own work. What the round trips spend beyond that on average
// (timer and scheduling delays on a busy machine, wake-ups) is latency, which pipelining
// overlaps. The model's baseline is then the measured one.
func splitCosts(l *models.Loop, tokens [][]*loopCall, use []int, linkRTTUS float64) float64 {
	n := len(l.Calls)
	byPos := make([][]float64, n)
	for _, t := range use {
		for i, c := range tokens[t] {
			// what the round trip spends beyond the send and the link
			moved := c.send + c.recv + 2*venusFrameBytes
			rest := c.rttUS - (l.SendUS + l.SendPerByteUS*(c.send+venusFrameBytes)) - linkRTTUS - l.Link.TransferUS(moved)
			byPos[i] = append(byPos[i], rest)
		}
	}
	floor := math.Inf(1)
	low := make([]float64, n)
	for i := range byPos {
		low[i] = math.Max(0, quantile(byPos[i], 0.1))
		if l.Calls[i].SendBytes <= smallRequest {
			floor = math.Min(floor, low[i])
		}
	}
	if math.IsInf(floor, 1) {
		floor = 0
	}
	l.MessageCPUUS = floor
	var left []float64
	for i := range low {
		l.Calls[i].WorkUS = math.Max(0, low[i]-floor)
		for _, q := range byPos[i] {
			left = append(left, q-floor-l.Calls[i].WorkUS)
		}
	}
	excess := math.Max(0, mean(left))
	if linkRTTUS > 0 {
		l.MessageUS = excess
	} else {
		// Without a link delay nothing is in flight: what a round trip spends beyond its
		// minimum is waiting for a CPU the client and server share, serial like the work.
		for i := range l.Calls {
			l.Calls[i].WorkUS += excess
		}
	}
	return excess
}

func allDone[T any](v []T, ok func(T) bool) bool {
	for _, x := range v {
		if !ok(x) {
			return false
		}
	}
	return true
}

func signature[T any](v []T, name func(T) string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = name(x)
	}
	return strings.Join(parts, ",")
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func fmtUS(us float64) string {
	switch {
	case us >= 1000:
		return strconv.FormatFloat(us/1000, 'f', 3, 64) + " ms"
	default:
		return strconv.FormatFloat(us, 'f', 1, 64) + " µs"
	}
}

// loopCall is one call of a token loop, as a baseline trace shows it.
type loopCall struct {
	name       string
	ts         int64   // start of its request frame, ns
	send, recv float64 // bytes, framing excluded
	sendUS     float64 // time to write the request frame
	rttUS      float64
	done       bool // its reply was seen
}

// loopTrace gathers, in one pass over a baseline trace, what FitLoop fits (a protocol.Visitor):
// the trace's metadata, the spans of its unit markers, and the calls it sent with their replies.
type loopTrace struct {
	unit  string
	meta  trace.Meta
	spans [][2]int64 // [start, end] of each unit marker, ns, in trace order
	calls []*loopCall
	byReq map[[2]uint64]*loopCall // by connection and request id
	spec  *protocol.Spec          // the spec of the first request sent, which classes the calls
	// horizon, once more than maxModelTokens units have ended, is the latest end among them: a
	// call after it lies in a later unit than the first maxModelTokens (units do not overlap),
	// and is not kept.
	horizon int64
}

func (lt *loopTrace) Begin(_ int, _ string, meta trace.Meta)        { lt.meta = meta }
func (lt *loopTrace) End(int, trace.Recovery)                       {}
func (lt *loopTrace) Answered(*protocol.Message, protocol.Answered) {}

func (lt *loopTrace) Record(rec *trace.Record) {
	m := &rec.Marker
	if rec.Kind != trace.KindMarker || m.Name != lt.unit || m.Dur <= 0 {
		return
	}
	lt.spans = append(lt.spans, [2]int64{m.TS, m.TS + m.Dur})
	if len(lt.spans) == maxModelTokens+1 {
		for _, sp := range lt.spans {
			lt.horizon = max(lt.horizon, sp[1])
		}
	}
}

func (lt *loopTrace) Message(m *protocol.Message) {
	if m.Truncated {
		return
	}
	if !m.IsReply && m.Dir == trace.DirSend {
		if lt.spec == nil {
			lt.spec = m.Spec()
		}
		if lt.horizon > 0 && m.TS > lt.horizon {
			return
		}
		c := &loopCall{name: m.Name, ts: m.TS, send: float64(m.Size - venusFrameBytes), sendUS: float64(m.Duration()) / 1e3}
		if c.name == "" {
			c.name = fmt.Sprintf("cmd%d", m.Command)
		}
		lt.calls = append(lt.calls, c)
		if m.ReqID != 0 {
			lt.byReq[[2]uint64{m.Conn, m.ReqID}] = c
		}
		return
	}
	if m.IsReply && m.RTT > 0 {
		c := lt.byReq[[2]uint64{m.Conn, m.ReqID}]
		if c == nil {
			return
		}
		c.recv = float64(m.Size - venusFrameBytes)
		c.rttUS = float64(m.RTT) / 1e3
		c.done = true
	}
}

// tokens returns the calls of each unit of spans (sorted by start), in the order they were sent.
func (lt *loopTrace) tokens(spans [][2]int64) [][]*loopCall {
	tokens := make([][]*loopCall, len(spans))
	for _, c := range lt.calls {
		i := sort.Search(len(spans), func(i int) bool { return spans[i][1] >= c.ts })
		if i < len(spans) && spans[i][0] <= c.ts {
			tokens[i] = append(tokens[i], c)
		}
	}
	return tokens
}

// delayFromMeta finds venusd's --delay in a trace's recorded command line, in µs.
func delayFromMeta(meta trace.Meta) (float64, bool) {
	for i, a := range meta.Command {
		v := ""
		switch {
		case (a == "--delay" || a == "-delay") && i+1 < len(meta.Command):
			v = meta.Command[i+1]
		case strings.HasPrefix(a, "--delay="), strings.HasPrefix(a, "-delay="):
			v = a[strings.IndexByte(a, '=')+1:]
		default:
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, false
		}
		return float64(d) / 1e3, true
	}
	if v, ok := meta.Labels["delay"]; ok {
		if d, err := time.ParseDuration(v); err == nil {
			return float64(d) / 1e3, true
		}
	}
	return 0, false
}

// ModelSchema is the schema name of `perflab model --json`.
const ModelSchema = "perflab.model/v1"

// Scenario is a named what-if.
type Scenario struct {
	Name   string
	WhatIf models.WhatIf
}

// ScenarioResult is one what-if and its prediction.
type ScenarioResult struct {
	Name      string            `json:"name"`
	Coalesce  int               `json:"coalesce"` // K: 1 none, 0 to the sync point
	Pipeline  int               `json:"pipeline"` // D: 1 none
	LinkRTTUS float64           `json:"link_rtt_us"`
	Bandwidth float64           `json:"bandwidth_bytes_per_s"` // 0 unlimited
	Predicted models.Prediction `json:"predicted"`
	Speedup   float64           `json:"speedup"` // predicted tokens/s over the measured baseline's
}

// ModelReport is what `perflab model` prints: the measured baseline and the predictions.
type ModelReport struct {
	Schema string `json:"schema"`
	Source string `json:"source"` // the trace, or "fit"
	Unit   string `json:"unit"`   // "token", or "request" for a batch fit
	// Baseline is the baseline as measured; ModelBaseline what the calibrated model gives for
	// it (a check of the calibration).
	Baseline      models.Prediction `json:"baseline"`
	ModelBaseline models.Prediction `json:"model_baseline"`
	// Predicted is the chosen scenario's prediction (the last of Scenarios).
	Predicted   models.Prediction `json:"predicted"`
	Scenarios   []ScenarioResult  `json:"scenarios"`
	Calls       []string          `json:"calls,omitempty"` // the representative token's calls
	Assumptions []string          `json:"assumptions"`
}

// PredictLoop predicts each scenario on a calibrated loop.
func PredictLoop(source string, fit *LoopFit, scenarios []Scenario) *ModelReport {
	r := &ModelReport{Schema: ModelSchema, Source: source, Unit: "token", Baseline: fit.Measured,
		ModelBaseline: fit.Loop.Predict(models.WhatIf{Coalesce: 1, Pipeline: 1}), Calls: fit.Calls,
		Assumptions: append([]string{}, fit.Notes...)}
	for _, s := range scenarios {
		p := fit.Loop.Predict(s.WhatIf)
		link := fit.Loop.Link
		if s.WhatIf.Link != nil {
			link = *s.WhatIf.Link
		}
		r.Scenarios = append(r.Scenarios, ScenarioResult{Name: s.Name, Coalesce: s.WhatIf.Coalesce, Pipeline: s.WhatIf.Pipeline,
			LinkRTTUS: link.RTTUS, Bandwidth: link.BandwidthBps, Predicted: p, Speedup: p.TokensPerS / fit.Measured.TokensPerS})
		r.Predicted = p
	}
	return r
}

// PredictBatch predicts each scenario from a batch model alone (perflab model --fit): the unit
// is one request, the baseline one request per cycle and one cycle in flight.
func PredictBatch(b models.Batch, scenarios []Scenario) *ModelReport {
	base := models.BatchWhatIf(b, 1, 1)
	r := &ModelReport{Schema: ModelSchema, Source: "fit", Unit: "request", Baseline: base, ModelBaseline: base,
		Assumptions: []string{
			fmt.Sprintf("batch model: a cycle of N requests takes %s + %s·N", fmtUS(b.TFixedUS), fmtUS(b.TPerReqUS)),
			"coalescing K puts K requests in one cycle; pipelining D keeps D cycles in flight, bounded by the serial T_per_req",
			"the link is part of T_fixed: --rtt and --bandwidth do not apply without a trace",
		}}
	for _, s := range scenarios {
		k, d := s.WhatIf.Coalesce, s.WhatIf.Pipeline
		if k < 1 {
			k = 1
		}
		p := models.BatchWhatIf(b, k, d)
		r.Scenarios = append(r.Scenarios, ScenarioResult{Name: s.Name, Coalesce: k, Pipeline: max(d, 1), Predicted: p, Speedup: p.TokensPerS / base.TokensPerS})
		r.Predicted = p
	}
	return r
}

// workSummary lists the largest per-call work of each command, largest first.
func workSummary(calls []models.Call) string {
	seen := map[string]bool{}
	type nw struct {
		n string
		w float64
	}
	var v []nw
	idx := map[string]int{}
	for _, c := range calls {
		if !seen[c.Name] {
			seen[c.Name] = true
			idx[c.Name] = len(v)
			v = append(v, nw{c.Name, c.WorkUS})
		} else if c.WorkUS > v[idx[c.Name]].w {
			v[idx[c.Name]].w = c.WorkUS
		}
	}
	sort.SliceStable(v, func(i, j int) bool { return v[i].w > v[j].w })
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = x.n + " " + fmtUS(x.w)
	}
	return strings.Join(parts, ", ")
}
