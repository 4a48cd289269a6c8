package models

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Segment is a run of calls in a token loop that ends at a sync point: the client issues Calls
// calls and must have the reply of the last one before it goes on. PerToken says how many such
// segments a token has (a mean, so it may be fractional).
type Segment struct {
	Calls    int     // calls in the segment, ≥ 1; the last one is the sync point
	PerToken float64 // segments of this length per token
}

// Loop describes a measured token loop: what one token costs when every call is one synchronous
// round trip (the baseline). Times are µs, sizes bytes.
type Loop struct {
	Segments []Segment // the sync segments of one token

	// ComputeUS is the client's time per token outside of round trips: work between sync points
	// that no transport change can remove.
	ComputeUS float64
	// RoundTrip is the cost of one round trip that carries n calls, without the link:
	// T_fixed (µs per message exchange: system calls, wake-ups, framing) + T_per_req·n
	// (µs per call of server work). T_fixed can be hidden by pipelining; T_per_req is serial.
	RoundTrip Batch
	// Link is the transport: its RTT is added to every round trip and may be hidden by
	// pipelining; its bandwidth makes bytes cost time, serially.
	Link Link

	SendBytesPerCall float64 // payload bytes per call, client to server
	RecvBytesPerCall float64 // payload bytes per call reply, server to client
	FrameBytes       float64 // bytes of framing per message (a header), both directions
	// RepliesPerCall is the fraction of baseline calls that get a reply frame (1 when every call
	// is a synchronous round trip).
	RepliesPerCall float64
}

// WhatIf is a change to a token loop.
type WhatIf struct {
	// Coalesce is K, the most calls carried by one message: calls of a segment are sent in
	// batches of K (one request and one reply each). 1 is the baseline; 0 or less means the
	// whole segment goes as one message (coalesce to the sync point).
	Coalesce int
	// Pipeline is D, the most messages in flight: the client waits for replies only at sync
	// points or when D are outstanding. 1 is the baseline (strict request/response).
	Pipeline int
	// Link, when set, replaces the measured link (RTT and bandwidth).
	Link *Link
}

// Prediction is what a token loop costs under a WhatIf.
type Prediction struct {
	MessagesPerToken   float64 // frames, both directions
	RoundTripsPerToken float64 // request/reply exchanges
	WaitsPerToken      float64 // times the client blocks on a reply
	BytesSentPerToken  float64
	BytesRecvPerToken  float64
	NetWaitUS          float64 // µs per token spent in round trips
	TokenTimeUS        float64 // µs per token
	TokensPerS         float64
}

// Mode is a named preset of (K, D), as venusd names its modes.
type Mode struct {
	Name     string
	Coalesce int // K: 1 none, 0 whole segment
	Pipeline int // D
}

// DefaultPipelineDepth is the in-flight depth the "pipeline" modes assume: deep enough that a
// segment's messages never wait for the window on the loops perflab measures.
const DefaultPipelineDepth = 64

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

// CallsPerToken returns the calls per token of the loop.
func (l Loop) CallsPerToken() float64 {
	var c float64
	for _, s := range l.Segments {
		c += float64(s.Calls) * s.PerToken
	}
	return c
}

// Validate reports the first thing wrong with l.
func (l Loop) Validate() error {
	if len(l.Segments) == 0 {
		return errors.New("token loop has no segments")
	}
	for _, s := range l.Segments {
		if s.Calls < 1 || s.Calls > 1<<20 || !(s.PerToken >= 0) || math.IsInf(s.PerToken, 0) {
			return fmt.Errorf("bad segment: %d calls, %g per token", s.Calls, s.PerToken)
		}
	}
	for name, v := range map[string]float64{
		"compute time": l.ComputeUS, "T_fixed": l.RoundTrip.TFixedUS, "T_per_req": l.RoundTrip.TPerReqUS,
		"link RTT": l.Link.RTTUS, "bandwidth": l.Link.BandwidthBps, "send bytes": l.SendBytesPerCall,
		"recv bytes": l.RecvBytesPerCall, "frame bytes": l.FrameBytes,
	} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("bad %s: %g", name, v)
		}
	}
	return nil
}

// Predict returns the cost of one token of l under w. It simulates each segment as a window of
// at most D messages in flight between a client and a single server: a message leaves when the
// window has room, reaches the server after half the round trip's latency plus its transfer
// time, waits for the server, is served for T_per_req per call, and its reply comes back after
// the other half plus its transfer time. The segment ends when the last reply is in. With
// K = D = 1 it reduces to the baseline: Σ calls × (T_fixed + T_per_req + link RTT + transfers).
func (l Loop) Predict(w WhatIf) Prediction {
	link := l.Link
	if w.Link != nil {
		link = *w.Link
	}
	d := w.Pipeline
	if d < 1 {
		d = 1
	}
	rep := l.RepliesPerCall
	if rep <= 0 || rep > 1 {
		rep = 1
	}
	var p Prediction
	for _, s := range l.Segments {
		k := w.Coalesce
		if k <= 0 || k > s.Calls {
			k = s.Calls
		}
		batches := (s.Calls + k - 1) / k
		sent := float64(s.Calls)*l.SendBytesPerCall + float64(batches)*l.FrameBytes
		recv := float64(s.Calls)*l.RecvBytesPerCall*rep + float64(batches)*l.FrameBytes
		msgs := float64(batches) * 2
		if k == 1 {
			// Uncoalesced calls keep the baseline's reply pattern.
			msgs = float64(batches) * (1 + rep)
			recv = float64(s.Calls) * (l.RecvBytesPerCall + l.FrameBytes) * rep
		}
		t := simulateSegment(s.Calls, k, d, l.RoundTrip, link, l.SendBytesPerCall, l.RecvBytesPerCall, l.FrameBytes)
		p.MessagesPerToken += msgs * s.PerToken
		p.RoundTripsPerToken += float64(batches) * s.PerToken
		p.WaitsPerToken += waits(batches, d) * s.PerToken
		p.BytesSentPerToken += sent * s.PerToken
		p.BytesRecvPerToken += recv * s.PerToken
		p.NetWaitUS += t * s.PerToken
	}
	p.TokenTimeUS = l.ComputeUS + p.NetWaitUS
	if p.TokenTimeUS > 0 {
		p.TokensPerS = 1e6 / p.TokenTimeUS
	}
	return p
}

// waits returns how many times the client blocks in a segment of b messages with window d:
// once at the sync point, and once per full window before it.
func waits(b, d int) float64 {
	if d >= b {
		return 1
	}
	return float64(b-d) + 1
}

// simulateSegment returns the µs from the first send of a segment to the last reply.
func simulateSegment(calls, k, d int, rt Batch, link Link, sendPerCall, recvPerCall, frame float64) float64 {
	batches := (calls + k - 1) / k
	done := make([]float64, batches)
	var lastSend, srvFree, upFree, downFree float64
	half := (rt.TFixedUS + link.RTTUS) / 2
	left := calls
	for i := 0; i < batches; i++ {
		n := k
		if left < k {
			n = left
		}
		left -= n
		send := lastSend
		if i >= d {
			send = math.Max(send, done[i-d])
		}
		lastSend = send
		// The uplink carries one message at a time.
		up := math.Max(send, upFree) + link.TransferUS(float64(n)*sendPerCall+frame)
		upFree = up
		start := math.Max(up+half, srvFree)
		srvFree = start + rt.TPerReqUS*float64(n)
		down := math.Max(srvFree+half, downFree) + link.TransferUS(float64(n)*recvPerCall+frame)
		downFree = down
		done[i] = down
	}
	end := 0.0
	for _, t := range done {
		end = math.Max(end, t)
	}
	return end
}

// Calibrate builds a Loop from a measured baseline where every call was one synchronous round
// trip: segs are the sync segments per token, tokenUS the measured µs per token, rttUS the mean
// measured round trip (µs, link included), link the link it was measured on, and serviceUS the
// server's work per call (µs; 0 when unknown, which treats the whole round trip as latency that
// pipelining can hide). The compute time is what the round trips leave of the token time; the
// fixed part of a round trip is what the link and the service leave of it.
func Calibrate(segs []Segment, tokenUS, rttUS, serviceUS float64, link Link, sendPerCall, recvPerCall, frame float64) (Loop, error) {
	l := Loop{Segments: segs, Link: link, SendBytesPerCall: sendPerCall, RecvBytesPerCall: recvPerCall, FrameBytes: frame, RepliesPerCall: 1}
	if err := l.Validate(); err != nil {
		return Loop{}, err
	}
	calls := l.CallsPerToken()
	transfer := link.TransferUS(sendPerCall+frame) + link.TransferUS(recvPerCall+frame)
	fixed := rttUS - serviceUS - link.RTTUS - transfer
	if fixed < 0 {
		fixed = 0
	}
	l.RoundTrip = Batch{TFixedUS: fixed, TPerReqUS: serviceUS}
	l.ComputeUS = tokenUS - calls*rttUS
	if l.ComputeUS < 0 {
		l.ComputeUS = 0
	}
	return l, nil
}
