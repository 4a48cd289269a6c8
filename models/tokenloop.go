package models

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// CallKind says how an API call of a token loop relates to the application's sync points.
type CallKind uint8

// Call kinds.
const (
	// Async is a call whose result the application does not need at once (recording, memory
	// transfers): coalescing bundles it into the next frame, pipelining does not wait for it.
	Async CallKind = iota
	// Submit is a queue submission: it closes a coalesced frame, and pipelining does not wait
	// for its reply.
	Submit
	// Sync is a host-visible sync point (a fence wait, a read of results): it closes a frame and
	// the application blocks until its reply is in.
	Sync
)

// String returns "async", "submit" or "sync".
func (k CallKind) String() string {
	switch k {
	case Submit:
		return "submit"
	case Sync:
		return "sync"
	}
	return "async"
}

// Call is one API call of a token, as the baseline (one synchronous round trip per call) made it.
type Call struct {
	Name      string
	Kind      CallKind
	SendBytes float64 // request bytes of the call, framing excluded
	RecvBytes float64 // reply bytes of the call, framing excluded
	WorkUS    float64 // server work of the call, µs: serial, never hidden
	// JoinNext, on a sync call, puts it in the same coalesced frame as the next call (a wait
	// and the read of its results travel together).
	JoinNext bool
}

// Loop describes one token of a measured token loop and the costs of moving it. Times are µs,
// sizes bytes.
type Loop struct {
	Calls []Call // the calls of one token, in order

	// ComputeUS is the client's time per token outside of calls, spread evenly before the calls.
	ComputeUS float64
	// MessageUS is the latency of one request/reply exchange beyond the link and the work:
	// wake-ups, reads, dispatch. It overlaps with other exchanges when they are pipelined.
	MessageUS float64
	// MessageCPUUS is the serial cost of one frame exchange on the server path (system calls,
	// decoding, dispatch): it is paid per frame, so coalescing saves it and pipelining does not.
	MessageCPUUS float64
	// PipelineHopUS is what a reply costs the client when it is pipelined: a receive thread
	// takes it and hands it over (a channel send and a wake-up), serially on the client.
	PipelineHopUS float64
	// SendUS and SendPerByteUS are the client's cost of writing one frame: the client cannot
	// do anything else meanwhile.
	SendUS        float64
	SendPerByteUS float64
	// ServerPerByteUS is the serial cost of a byte on the request and reply path (copies,
	// checksums), µs per byte.
	ServerPerByteUS float64
	// Link is the transport: half its RTT each way, and its bandwidth serialises frames.
	Link Link
	// FrameBytes is the framing of one frame (a header); ReplyRecordBytes the fixed part of a
	// reply record per call that wants one.
	FrameBytes       float64
	ReplyRecordBytes float64
}

// WhatIf is a change to a token loop.
type WhatIf struct {
	// Coalesce is K, the most calls carried by one frame. 1 is the baseline (a frame per call);
	// 0 or less means frames end only at submits and sync points (coalescing to the sync point).
	// A frame of async calls only (cut by K) goes without asking for a reply.
	Coalesce int
	// Pipeline is D, the most reply-wanting frames in flight. 1 or less is the baseline: the
	// client waits for every reply. Above 1 it waits only at sync points or for a free slot.
	Pipeline int
	// Link, when set, replaces the measured link (RTT and bandwidth).
	Link *Link
}

// Prediction is what one token costs under a WhatIf.
type Prediction struct {
	MessagesPerToken   float64 `json:"messages_per_token"`    // frames, both directions
	RoundTripsPerToken float64 `json:"round_trips_per_token"` // request frames answered by a reply frame
	WaitsPerToken      float64 `json:"waits_per_token"`       // times the client blocked on a reply
	BytesSentPerToken  float64 `json:"bytes_sent_per_token"`
	BytesRecvPerToken  float64 `json:"bytes_recv_per_token"`
	NetWaitUS          float64 `json:"net_wait_us"`   // µs per token the client spent sending or blocked
	TokenTimeUS        float64 `json:"token_time_us"` // µs per token
	TokensPerS         float64 `json:"tokens_per_s"`
}

// Mode is a named preset of (K, D), as venusd names its modes.
type Mode struct {
	Name     string
	Coalesce int // K: 1 none, 0 to the sync point
	Pipeline int // D: 1 none
}

// DefaultPipelineDepth is the in-flight depth the pipeline presets assume: venusd's default.
const DefaultPipelineDepth = 8

// Modes are venusd's modes as presets.
var Modes = []Mode{
	{Name: "baseline", Coalesce: 1, Pipeline: 1},
	{Name: "coalesce", Coalesce: 0, Pipeline: 1},
	{Name: "pipeline", Coalesce: 1, Pipeline: DefaultPipelineDepth},
	{Name: "coalesce+pipeline", Coalesce: 0, Pipeline: DefaultPipelineDepth},
}

// LookupMode returns the preset named name.
func LookupMode(name string) (Mode, error) {
	var names []string
	for _, m := range Modes {
		if m.Name == name {
			return m, nil
		}
		names = append(names, m.Name)
	}
	return Mode{}, fmt.Errorf("unknown mode %q (known: %s)", name, strings.Join(names, ", "))
}

// WhatIf returns the mode as a WhatIf on the measured link.
func (m Mode) WhatIf() WhatIf { return WhatIf{Coalesce: m.Coalesce, Pipeline: m.Pipeline} }

// Validate reports the first thing wrong with l.
func (l Loop) Validate() error {
	if len(l.Calls) == 0 {
		return errors.New("token loop has no calls")
	}
	if len(l.Calls) > 1<<20 {
		return fmt.Errorf("token loop has %d calls, more than 2^20", len(l.Calls))
	}
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	for i, c := range l.Calls {
		if bad(c.SendBytes) || bad(c.RecvBytes) || bad(c.WorkUS) || c.Kind > Sync {
			return fmt.Errorf("call %d (%s): bad sizes or work", i, c.Name)
		}
	}
	for name, v := range map[string]float64{
		"compute time": l.ComputeUS, "message latency": l.MessageUS, "message work": l.MessageCPUUS, "pipeline hop": l.PipelineHopUS, "send cost": l.SendUS,
		"send cost per byte": l.SendPerByteUS, "server cost per byte": l.ServerPerByteUS,
		"link RTT": l.Link.RTTUS, "bandwidth": l.Link.BandwidthBps, "frame bytes": l.FrameBytes,
		"reply record bytes": l.ReplyRecordBytes,
	} {
		if bad(v) {
			return fmt.Errorf("bad %s: %g", name, v)
		}
	}
	return nil
}

// frame is one frame the client sends under a WhatIf.
type frame struct {
	calls      int
	sendBytes  float64
	recvBytes  float64
	work       float64
	wantsReply bool
	sync       bool // the client blocks on its reply
	lastCall   int  // index of the call that closes it
}

// Frames returns the frames of one token under coalescing K (see WhatIf.Coalesce).
func (l Loop) frames(k int) []frame {
	var out []frame
	cur := frame{}
	open := false
	for i, c := range l.Calls {
		cur.calls++
		cur.sendBytes += c.SendBytes
		cur.work += c.WorkUS
		open = true
		boundary := k == 1 || c.Kind != Async || (k > 1 && cur.calls >= k)
		if c.Kind != Async {
			cur.wantsReply = true
		}
		if c.Kind == Sync {
			cur.sync = true
		}
		if c.Kind != Async || k == 1 {
			cur.recvBytes += c.RecvBytes + l.ReplyRecordBytes
			cur.wantsReply = true
		}
		if c.Kind == Sync && c.JoinNext && k != 1 && i+1 < len(l.Calls) && (k <= 0 || cur.calls < k) {
			boundary = false
		}
		if boundary {
			cur.lastCall = i
			out = append(out, cur)
			cur, open = frame{}, false
		}
	}
	if open {
		cur.lastCall = len(l.Calls) - 1
		out = append(out, cur)
	}
	return out
}

// Predict returns the cost of one token of l under w. It replays the token: the client computes
// ComputeUS/len(Calls) before each call; a frame leaves when its last call is made and, when
// it wants a reply, a slot of the window D is free; writing it costs the client SendUS plus
// SendPerByteUS per byte; it crosses half the link's RTT and the link's bandwidth, waits for the
// server, which spends the calls' WorkUS and ServerPerByteUS per byte on it serially; the reply
// comes back after MessageUS and the other half of the RTT. Without pipelining the client waits
// for every reply; with it, only at sync points. With K = D = 1 the prediction is the measured
// baseline.
func (l Loop) Predict(w WhatIf) Prediction {
	s := tokenSim{l: &l, link: l.Link}
	if w.Link != nil {
		s.link = *w.Link
	}
	k := w.Coalesce
	pipelined := w.Pipeline > 1
	d := w.Pipeline
	if d < 1 {
		d = 1
	}
	frames := l.frames(k)
	gap := l.ComputeUS / float64(len(l.Calls))
	prevCall := -1
	for _, f := range frames {
		calls := f.lastCall - prevCall
		prevCall = f.lastCall
		s.t += gap * float64(calls)
		bytesOut := f.sendBytes + l.FrameBytes
		bytesIn := f.recvBytes + l.FrameBytes
		if f.wantsReply && pipelined && len(s.inflight) >= d {
			// Wait for the oldest outstanding reply to free a slot.
			oldest := s.inflight[0]
			s.inflight = s.inflight[1:]
			s.waitUntil(oldest)
		}
		s.send(&f, bytesOut, bytesIn)
		if !f.wantsReply {
			continue
		}
		down := s.reply(bytesIn, pipelined)
		if !pipelined || f.sync {
			s.p.WaitsPerToken++
			// Everything sent before is answered before this reply (frames keep their order).
			s.inflight = s.inflight[:0]
			s.waitUntil(down)
			continue
		}
		s.inflight = append(s.inflight, down)
	}
	// A token ends when its last reply is in.
	for _, r := range s.inflight {
		s.waitUntil(r)
	}
	s.t += gap * float64(len(l.Calls)-1-prevCall)
	s.p.TokenTimeUS = s.t
	if s.t > 0 {
		s.p.TokensPerS = 1e6 / s.t
	}
	return s.p
}

// tokenSim is the state of Predict's simulation of one token on link: the client's clock t and
// when the server and each direction of the link are next free (µs), the reply times of the
// outstanding reply-wanting frames, and the prediction so far.
type tokenSim struct {
	l                            *Loop
	link                         Link
	p                            Prediction
	t, srvFree, upFree, downFree float64
	inflight                     []float64
}

// waitUntil moves the client's clock to at, counting the wait as network wait, when at is later.
func (s *tokenSim) waitUntil(at float64) {
	if at > s.t {
		s.p.NetWaitUS += at - s.t
		s.t = at
	}
}

// send sends frame f of bytesOut bytes (its reply, if any, bytesIn): the client's send cost, the
// uplink, and the server's work on it.
func (s *tokenSim) send(f *frame, bytesOut, bytesIn float64) {
	l := s.l
	sendCost := l.SendUS + l.SendPerByteUS*bytesOut
	start := s.t
	s.t += sendCost
	s.p.NetWaitUS += sendCost
	s.p.BytesSentPerToken += bytesOut
	s.p.MessagesPerToken++
	up := math.Max(start, s.upFree) + s.link.TransferUS(bytesOut)
	s.upFree = up
	arrive := up + s.link.RTTUS/2 + s.l.MessageUS/2
	begin := math.Max(arrive, s.srvFree)
	s.srvFree = begin + l.MessageCPUUS + f.work + l.ServerPerByteUS*(bytesOut+bytesIn)
}

// reply returns when the reply of bytesIn bytes to the frame just sent is at the client, after the
// downlink and, when pipelined, the receive thread's hand-over.
func (s *tokenSim) reply(bytesIn float64, pipelined bool) float64 {
	l := s.l
	down := math.Max(s.srvFree+s.link.RTTUS/2+l.MessageUS/2, s.downFree) + s.link.TransferUS(bytesIn)
	s.downFree = down
	s.p.MessagesPerToken++
	s.p.RoundTripsPerToken++
	s.p.BytesRecvPerToken += bytesIn
	if pipelined {
		// The receive thread's hand-over delays the reply and costs the client its time.
		down += l.PipelineHopUS
		s.t += l.PipelineHopUS
		s.p.NetWaitUS += l.PipelineHopUS
	}
	return down
}

// BatchWhatIf predicts, from a fitted batch model alone (no trace), the cost of one request when
// K requests share a cycle and D cycles are in flight: time per request
// max(T_per_req·K, T_cycle(K)/D)/K µs, 2/K messages and 1/K round trips per request. The unit of
// the returned Prediction's "token" fields is one request.
func BatchWhatIf(b Batch, k, d int) Prediction {
	if k < 1 {
		k = 1
	}
	if d < 1 {
		d = 1
	}
	kf := float64(k)
	cycle := b.Cycle(kf)
	per := math.Max(b.TPerReqUS*kf, cycle/float64(d)) / kf
	p := Prediction{MessagesPerToken: 2 / kf, RoundTripsPerToken: 1 / kf, WaitsPerToken: 1 / kf / float64(d),
		NetWaitUS: per, TokenTimeUS: per}
	if per > 0 {
		p.TokensPerS = 1e6 / per
	}
	return p
}
