package analyzers

import (
	"fmt"

	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/evidence"
	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/trace"
)

// SummarySchema is the schema name of `perflab analyze --format json`.
const SummarySchema = "perflab.analyze/v1"

// Summary is the result of analysing one or more traces: what `perflab analyze --format json`
// prints, and what compare and gate read back. Fields may be added; none may be renamed or change
// meaning (docs/design.md, "JSON fields that scripts rely on"). Durations end in _us
// (microseconds) or _s (seconds).
type Summary struct {
	Schema   string          `json:"schema"`
	Traces   []string        `json:"traces"`             // the files analysed
	Meta     []trace.Meta    `json:"meta"`               // one per trace
	Protocol string          `json:"protocol"`           // decoder used: venus, ggml-rpc, resp, raw, or a spec's name
	Decoding *Decoding       `json:"decoding,omitempty"` // how much of the data the decoders explained
	Events   uint64          `json:"events"`             // events read
	Lost     uint64          `json:"lost"`               // events the producers reported lost, all sources
	Recovery *trace.Recovery `json:"recovery,omitempty"` // present when a trace was damaged or cut
	Duration float64         `json:"duration_s"`         // first to last event, s; of several traces, the sum of theirs
	// UndecodedBytes counts the bytes the protocol decoder could not read as messages.
	UndecodedBytes uint64 `json:"undecoded_bytes,omitempty"`
	// CallsPastHead counts the calls of a RESP connection that held more pipelined messages
	// than their captured payload heads show: when it is not 0, the counts of messages,
	// requests and round trips, and the requests in flight, are lower bounds.
	CallsPastHead uint64 `json:"calls_past_head,omitempty"`
	// BytesPastHead sums those calls' bytes past what was seen of them: the most the messages
	// not counted can take (a RESP value takes 3 bytes at least), so at most BytesPastHead/3
	// messages were missed.
	BytesPastHead uint64 `json:"bytes_past_head,omitempty"`
	// CallsBlind counts the calls of a text protocol (HTTP, a line protocol) whose message's
	// lines ran past the captured payload head: each such message was taken to end with its
	// call, so a message pipelined after it in the same call would not be counted.
	CallsBlind uint64 `json:"calls_blind,omitempty"`
	// PushesPastHead counts the calls of a subscribed (or monitoring) RESP connection, waiting
	// for no reply, that held more pushes (pub/sub messages, MONITOR lines) than their heads
	// show: the message counts are then lower bounds, but not the requests or round trips.
	PushesPastHead uint64 `json:"pushes_past_head,omitempty"`

	Totals      Totals        `json:"totals"`
	TLS         *TLSStats     `json:"tls,omitempty"`    // TLS plaintext and the ciphertext that carried it, when recorded
	Errors      []ErrnoCount  `json:"errors,omitempty"` // failed calls by errno, counted apart from Totals
	Connections []ConnStats   `json:"connections"`
	Processes   []ProcStats   `json:"processes,omitempty"`
	Commands    []CmdStats    `json:"commands"`
	Statuses    []StatusCount `json:"statuses,omitempty"` // replies by status (HTTP), when the protocol has one
	Batches     *BatchStats   `json:"batches,omitempty"`  // venus-mesa: commands split out of request frames
	RoundTrips  RoundTrips    `json:"round_trips"`
	Units       []UnitStats   `json:"units"`
	// UnitShapes lists every shape of unit (by command sequence), steady state included, per
	// trace, when units are opened by commands.
	UnitShapes []UnitStats  `json:"unit_shapes,omitempty"`
	Phases     []PhaseStats `json:"phases,omitempty"`
	Windows    []Window     `json:"windows,omitempty"` // per-100-call summaries, Venus Plus style

	InFlight   *InFlight   `json:"inflight,omitempty"`
	LittlesLaw []LittleRow `json:"littles_law"`
	BatchFit   *BatchFit   `json:"batch_fit,omitempty"`
	// BatchRefinement is the effective T_per_req at each N when the linear fit is curved
	// (seed 003 §5.4: the per-request cost grows with load).
	BatchRefinement []Refinement `json:"batch_refinement,omitempty"`
	Modes           []Mode       `json:"modes"`
	// ModesOf says what Modes are populations of: "rtt" (a client's round trips) or
	// "service" (a server's service time); never system-call durations.
	ModesOf   string       `json:"modes_of,omitempty"`
	Histogram []HistBucket `json:"histogram,omitempty"` // latency, log buckets, of HistogramOf
	// HistogramOf is "rtt", "service", or "syscall" (system-call durations, when there are no
	// round trips).
	HistogramOf string      `json:"histogram_of,omitempty"`
	Timeline    []TimePoint `json:"timeline,omitempty"` // messages per second over time

	// Loops are the event-loop threads of a server recorded with their wait calls (record
	// --waits): cycles, phases and their batch model (package loops).
	Loops *loops.Report `json:"loops,omitempty"`
	// TwoHosts splits the round trips of a merged trace (perflab merge) into client, network,
	// server queue and service, counting each message once (docs/merge.md); nil otherwise.
	TwoHosts *breakdown.Report `json:"two_hosts,omitempty"`

	// Evidence is why the round trips took their time (kernel evidence from record
	// --evidence: scheduler, TCP, connections) and the findings, each with its cost and fix;
	// nil when the traces hold no evidence and nothing was found.
	Evidence *evidence.Report `json:"evidence,omitempty"`

	Warnings []string `json:"warnings"`
}

// HeadAdvice is the advice on bytes that the payload heads of traces recorded with metas did
// not show: to record with the largest head a trace keeps (trace.MaxPayload bytes) "to " what,
// or, when every one of them already kept that many, that those calls are longer than that.
func HeadAdvice(metas []trace.Meta, what string) string {
	for _, m := range metas {
		if m.PayloadBytes < trace.MaxPayload {
			return fmt.Sprintf("record with --payload-bytes %d to %s", trace.MaxPayload, what)
		}
	}
	return fmt.Sprintf("the trace already kept the most of each call a trace keeps, %d bytes: these calls are longer", trace.MaxPayload)
}

// CountsLowerBound reports whether the message, request and round-trip counts (and the requests
// in flight) are lower bounds: RESP values lay past the captured heads, or text messages ran
// past them while replies answer requests not seen.
func (s *Summary) CountsLowerBound() bool {
	return s.CallsPastHead > 0 || s.CallsBlind > 0 && s.RoundTrips.Unpaired > 0
}

// Totals are the send and receive totals over all connections.
type Totals struct {
	Send DirTotals `json:"send"`
	Recv DirTotals `json:"recv"`
}

// DirTotals counts one direction. Calls are system calls (or tracer operations) that moved data;
// Frames are protocol messages decoded, when a protocol is.
type DirTotals struct {
	Calls  uint64 `json:"calls"`
	Bytes  uint64 `json:"bytes"`
	Frames uint64 `json:"frames"`
}

// ErrnoCount counts failed calls with one errno.
type ErrnoCount struct {
	Errno uint32 `json:"errno"`
	Name  string `json:"name"` // "EAGAIN"
	Dir   string `json:"direction"`
	Count uint64 `json:"count"`
}

// Latency is a latency distribution in microseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999,omitempty"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean,omitempty"`
	// P50Low and P50High bound the median with DefaultConfidence, when there are enough samples.
	P50Low  float64 `json:"p50_ci_low,omitempty"`
	P50High float64 `json:"p50_ci_high,omitempty"`
	// P99Low and P99High bound the 99th percentile likewise (from about 300 samples).
	P99Low  float64 `json:"p99_ci_low,omitempty"`
	P99High float64 `json:"p99_ci_high,omitempty"`
	N       uint64  `json:"n,omitempty"`
}

// DirStats describes one direction of one connection.
type DirStats struct {
	Calls     uint64  `json:"calls"`
	Bytes     uint64  `json:"bytes"`
	Frames    uint64  `json:"frames,omitempty"`
	LatencyUS Latency `json:"latency_us"`
}

// ConnStats describes one connection.
type ConnStats struct {
	Trace  string   `json:"trace,omitempty"` // the file it is of, when several are analysed
	ID     uint64   `json:"id"`
	Family string   `json:"family"`
	Local  string   `json:"local"`
	Remote string   `json:"remote"`
	PID    uint32   `json:"pid"`
	Send   DirStats `json:"send"`
	Recv   DirStats `json:"recv"`
}

// ProcStats sums one process's connections, with its round trips and the time it was blocked
// on them.
type ProcStats struct {
	Trace       string    `json:"trace,omitempty"` // the file it is of, when several are analysed
	PID         uint32    `json:"pid"`
	Connections int       `json:"connections"`
	Send        DirTotals `json:"send"`
	Recv        DirTotals `json:"recv"`
	RoundTrips  uint64    `json:"round_trips"`
	BlockedS    float64   `json:"blocked_s"`
}

// CmdStats counts one protocol command in one direction.
type CmdStats struct {
	Protocol  string `json:"protocol"`
	Name      string `json:"name"`
	ID        uint64 `json:"id"`
	Direction string `json:"direction"`
	Kind      string `json:"kind"` // "request", "reply" (a reply is named after its request) or "push" (sent by a server of its own accord: named by its kind, "message")
	Count     uint64 `json:"count"`
	Bytes     uint64 `json:"bytes"`
	// SpanS is, when several traces are analysed and the command is not in every one, the
	// summed spans of those it is in, s: its rate is Count / SpanS (else Count / duration_s)
	SpanS float64 `json:"span_s,omitempty"`
	// RTTUS is, on the replies a client received, the round-trip time of the requests of this
	// command; on the replies a server sent, its service time (request received → reply sent).
	RTTUS *Latency `json:"rtt_us,omitempty"`
}

// Decoding says how much of the traffic the protocol decoders explained: bytes of messages
// decoded whole, out of the bytes the data events moved.
type Decoding struct {
	Mode         string  `json:"mode"` // "auto", "forced" (--protocol NAME) or "spec" (--protocol-spec)
	Bytes        uint64  `json:"bytes"`
	DecodedBytes uint64  `json:"decoded_bytes"`
	Share        float64 `json:"share"` // DecodedBytes / Bytes, 0..1
	// UnseenBytes are, of Bytes, those past the captured payload heads that no decoder could
	// frame: Share is then low because of the heads, not the protocol (Summary.CallsPastHead)
	UnseenBytes uint64          `json:"unseen_bytes,omitempty"`
	Protocols   []ProtocolShare `json:"protocols"`
}

// ProtocolShare is what one protocol explained of the connections it decoded.
type ProtocolShare struct {
	Name         string  `json:"name"`
	Connections  int     `json:"connections"`
	Bytes        uint64  `json:"bytes"`
	DecodedBytes uint64  `json:"decoded_bytes"`
	Share        float64 `json:"share"`
	// UnseenBytes are, of Bytes, those past the calls' captured payload heads that no decoder
	// could frame (pipelined values a short head did not reach)
	UnseenBytes uint64 `json:"unseen_bytes,omitempty"`
}

// StatusCount counts the replies of one protocol with one status (HTTP's 200, 404).
type StatusCount struct {
	Protocol string `json:"protocol"`
	Code     int    `json:"code"`
	Count    uint64 `json:"count"`
}

// RoundTrips describes request/reply exchanges.
type RoundTrips struct {
	Count    uint64  `json:"count"`
	RTTUS    Latency `json:"rtt_us"`
	BlockedS float64 `json:"blocked_s"` // time the client waited on replies, s
	// ServiceUS is the server's service time, when the server is traced: from the request's
	// last byte received to the reply's first byte sent (never the wait for the request).
	ServiceUS *Latency `json:"service_us,omitempty"`
	// ServiceToLastUS is the same, to the reply's last byte sent.
	ServiceToLastUS *Latency `json:"service_to_last_byte_us,omitempty"`
	// FirstByteUS is, on a client, the time from the request's first byte sent to the reply's
	// first byte received.
	FirstByteUS *Latency `json:"first_byte_us,omitempty"`
	Unanswered  uint64   `json:"unanswered"` // requests that wanted a reply and got none
	// Client counts the round trips a client made (RTTUS describes them); Served those a
	// server served (ServiceUS). Count is their sum: the one round-trip count of the traces.
	Client uint64 `json:"client"`
	Served uint64 `json:"served"`
	// Unpaired counts replies that answered no request seen.
	Unpaired uint64 `json:"unpaired"`
}

// UnitStats describes a unit of work (a token, a decode step).
type UnitStats struct {
	Name              string  `json:"name"` // "token"
	Count             uint64  `json:"count"`
	MessagesPerUnit   float64 `json:"messages_per_unit"` // frames, both directions
	RoundTripsPerUnit float64 `json:"round_trips_per_unit"`
	BytesSentPerUnit  float64 `json:"bytes_sent_per_unit"`
	BytesRecvPerUnit  float64 `json:"bytes_recv_per_unit"`
	UnitTimeUS        float64 `json:"unit_time_us"` // mean wall time of one unit
	NetWaitUS         float64 `json:"net_wait_us"`  // mean time per unit blocked on round trips
	UnitsPerS         float64 `json:"units_per_s"`  // throughput
	MaxSpeedup        float64 `json:"max_speedup"`  // unit time / (unit time - network wait): the bound from removing round trips
	// SpeedupAssumes states what MaxSpeedup assumes.
	SpeedupAssumes string `json:"max_speedup_assumes,omitempty"`
	// RequestsPerUnit counts requests (client to server) and RepliesPerUnit replies, apart.
	RequestsPerUnit float64 `json:"requests_per_unit"`
	RepliesPerUnit  float64 `json:"replies_per_unit"`
	// Side is "client" or "server": whose trace the units were counted on.
	Side string `json:"side,omitempty"`
	// ServerTimeUS is, on a server's trace, the mean time per unit the server was not waiting
	// in a receive call (its service); NotServerUS the rest of the unit (the client and the
	// network).
	ServerTimeUS float64 `json:"server_time_us,omitempty"`
	NotServerUS  float64 `json:"not_server_us,omitempty"`
	// Trace is the file the units are of; Shape is "steady" (the units with the most common
	// command sequence, which per-unit figures default to), "before steady" (warmup), "other",
	// or "all" (no steady state); Sequence the units' requests in order.
	Trace    string `json:"trace,omitempty"`
	Shape    string `json:"shape,omitempty"`
	Sequence string `json:"sequence,omitempty"`
}

// PhaseStats describes a phase (load, generate) from markers or detection.
type PhaseStats struct {
	Trace     string  `json:"trace,omitempty"` // the file it is of, when several are analysed
	Name      string  `json:"name"`
	StartS    float64 `json:"start_s"` // from the first event
	DurationS float64 `json:"duration_s"`
	Messages  uint64  `json:"messages"`
	Bytes     uint64  `json:"bytes"`
}

// Window is a per-100-call summary in the Venus Plus format.
type Window struct {
	Dir      string  `json:"direction"` // send, recv, or rtt (a command's round trips)
	Command  string  `json:"command,omitempty"`
	Calls    uint64  `json:"calls"` // cumulative calls at the end of the window
	AvgUS    float64 `json:"avg_us"`
	AvgBytes float64 `json:"avg_bytes"`
	MaxUS    float64 `json:"max_us"`
}

// InFlight describes the requests outstanding over time.
type InFlight struct {
	// Of says what is in flight: "round trips" (a client's requests awaiting their replies)
	// or "service" (a server's requests between their arrival and their reply).
	Of   string  `json:"of,omitempty"`
	Mean float64 `json:"mean"`
	Max  int     `json:"max"` // the most at once in one process (Mean sums all processes)
	// MaxAtLeast: Max is a lower bound. perflab counts up to 65 requests in flight per round
	// trip (its recent round trips per process), and a count reached that.
	MaxAtLeast bool        `json:"max_at_least,omitempty"`
	Series     []TimePoint `json:"series,omitempty"`
}

// LittleRow checks Little's law L = λ·W on one group of measurements (a run, a client count).
type LittleRow struct {
	Label          string  `json:"label"`
	InFlight       float64 `json:"inflight"`                // L, mean requests in flight
	ThroughputPerS float64 `json:"throughput_per_s"`        // λ, completed requests per second
	RTTPredictedUS float64 `json:"rtt_predicted_us"`        // L/λ
	RTTMeasuredUS  float64 `json:"rtt_measured_us"`         // W measured: the mean response time, as Little's law has it
	RTTMedianUS    float64 `json:"rtt_median_us,omitempty"` // the median response time, shown apart (a long tail puts it far below the mean)
	Error          float64 `json:"error"`                   // predicted/measured - 1
}

// BatchFit is the batch model T_cycle = T_fixed + T_per_req·N fitted to (N, T) points.
type BatchFit struct {
	TFixedUS      float64    `json:"t_fixed_us"`
	TPerReqUS     float64    `json:"t_per_req_us"`
	R2            float64    `json:"r2"`
	TFixedCI      [2]float64 `json:"t_fixed_ci_us"`
	TPerReqCI     [2]float64 `json:"t_per_req_ci_us"`
	Points        int        `json:"points"`
	ThroughputMax float64    `json:"throughput_max_per_s"` // 1/T_per_req
	Residuals     []float64  `json:"residuals_us,omitempty"`
}

// Mode is one population of a latency distribution.
type Mode struct {
	CenterUS float64 `json:"center_us"`
	Share    float64 `json:"share"` // 0..1
	LowUS    float64 `json:"low_us"`
	HighUS   float64 `json:"high_us"`
}

// HistBucket is one bucket of a latency histogram: [LowUS, HighUS).
type HistBucket struct {
	LowUS  float64 `json:"low_us"`
	HighUS float64 `json:"high_us"`
	Count  uint64  `json:"count"`
}

// TimePoint is a value at a time from the first event.
type TimePoint struct {
	TS    float64 `json:"t_s"`
	Value float64 `json:"value"`
}
