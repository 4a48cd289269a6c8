package breakdown

import (
	"fmt"
	"math"
	"sort"

	"github.com/perflab/perflab/merge"
	"github.com/perflab/perflab/trace"
)

// MaxMessages bounds the messages a Builder keeps (about 100 bytes each); past it the rest are
// counted but not decomposed, and the report says so.
const MaxMessages = 1 << 23

// SlowestKept is how many of the slowest round trips a Report lists with their timestamps.
const SlowestKept = 20

// Msg is one decoded protocol message seen at one end of a connection of a merged trace, its
// times on the merged timeline.
type Msg struct {
	Conn  uint64 // connection id in the merged trace
	Send  bool   // sent by the traced process at this end (else received)
	TS    int64  // start of the first call that carried it, ns
	End   int64  // end of the last call that carried it, ns
	Size  int64  // bytes, header included
	Name  string // command name; a reply carries its request's
	Reply bool   // a reply to an earlier request
	ReqTS int64  // on a reply paired at this end, its request's TS; 0 when unpaired
	Unit  bool   // a request that opens a unit of work
	PID   uint32 // the process and thread whose calls carried it
	TID   uint32
}

// Builder collects a merged trace's connections, markers and messages; Report decomposes them.
type Builder struct {
	clocks  []trace.Clock
	conns   map[uint64]trace.Connection
	order   []uint64 // connection ids in first-seen order
	msgs    map[uint64][]Msg
	marks   []trace.Marker
	kept    int
	dropped uint64
}

// New returns a Builder for a merged trace whose metadata carries clocks (trace.Meta.Clocks),
// one per input host.
func New(clocks []trace.Clock) *Builder {
	return &Builder{clocks: clocks, conns: map[uint64]trace.Connection{}, msgs: map[uint64][]Msg{}}
}

// Clocks returns the clocks of the merged trace's inputs, as New was given them.
func (b *Builder) Clocks() []trace.Clock { return b.clocks }

// Conn records a connection (a later record of the same id updates it).
func (b *Builder) Conn(c trace.Connection) {
	if _, ok := b.conns[c.ID]; !ok {
		b.order = append(b.order, c.ID)
	}
	b.conns[c.ID] = c
}

// Marker records a marker (the unit-of-work spans are taken from them).
func (b *Builder) Marker(m trace.Marker) {
	if m.Dur > 0 && len(b.marks) < MaxMessages {
		b.marks = append(b.marks, m)
	}
}

// Message records one message end; messages of one connection and direction must come in the
// order their frames complete.
func (b *Builder) Message(m Msg) {
	if b.kept >= MaxMessages {
		b.dropped++
		return
	}
	b.kept++
	b.msgs[m.Conn] = append(b.msgs[m.Conn], m)
}

// host returns the index of the input whose connection ids hold id.
func (b *Builder) host(id uint64) int {
	h := 0
	for i, c := range b.clocks {
		if c.ConnBase <= id && c.ConnBase >= b.clocks[h].ConnBase {
			h = i
		}
	}
	return h
}

// pair is one connection seen from both ends: cl at the client (it sent the requests), sv at
// the server.
type pair struct{ cl, sv uint64 }

// pairs matches the connections of different hosts by mirrored addresses, in first-seen order
// when several share them, as merge does.
func (b *Builder) pairs() []pair {
	type key struct {
		host        int
		fam         trace.Family
		local, peer string
	}
	ends := map[key][]uint64{}
	var keys []key
	for _, id := range b.order {
		c := b.conns[id]
		if c.Family != trace.FamilyTCP && c.Family != trace.FamilyUDP || c.Local == "" || c.Remote == "" {
			continue
		}
		k := key{b.host(id), c.Family, merge.NormAddr(c.Local), merge.NormAddr(c.Remote)}
		if len(ends[k]) == 0 {
			keys = append(keys, k)
		}
		ends[k] = append(ends[k], id)
	}
	var out []pair
	used := map[uint64]bool{}
	for _, k := range keys {
		for _, id := range ends[k] {
			if used[id] {
				continue
			}
			for _, k2 := range keys {
				if k2.host == k.host || k2.fam != k.fam || k2.local != k.peer || k2.peer != k.local {
					continue
				}
				for _, id2 := range ends[k2] {
					if used[id2] {
						continue
					}
					used[id], used[id2] = true, true
					out = append(out, b.orient(id, id2))
					break
				}
				if used[id] {
					break
				}
			}
		}
	}
	return out
}

// orient returns the pair with the client first: the end that received more paired replies.
func (b *Builder) orient(x, y uint64) pair {
	replies := func(id uint64) int {
		n := 0
		for _, m := range b.msgs[id] {
			if m.Reply && !m.Send && m.ReqTS != 0 {
				n++
			}
		}
		return n
	}
	if replies(y) > replies(x) {
		return pair{y, x}
	}
	return pair{x, y}
}

// Parts is a round trip (or a sum of them) split into its parts, µs. Client + NetOut + Queue +
// Service + NetBack = RTT.
type Parts struct {
	RTT     float64 `json:"rtt_us"`      // client: request's first byte out → reply's last byte in
	Client  float64 `json:"client_us"`   // in the client's own calls, and a reply waiting for the client to read it
	NetOut  float64 `json:"net_out_us"`  // request's last send call ended → the request was on the server's host
	Queue   float64 `json:"queue_us"`    // the request waited on the server's host before the server read it
	Service float64 `json:"service_us"`  // the server had the request → its reply's last send call ended
	NetBack float64 `json:"net_back_us"` // the reply's last send call ended → the reply was on the client's host
}

func (p *Parts) add(q Parts) {
	p.RTT += q.RTT
	p.Client += q.Client
	p.NetOut += q.NetOut
	p.Queue += q.Queue
	p.Service += q.Service
	p.NetBack += q.NetBack
}

func (p Parts) scale(k float64) Parts {
	return Parts{round3(p.RTT * k), round3(p.Client * k), round3(p.NetOut * k), round3(p.Queue * k), round3(p.Service * k), round3(p.NetBack * k)}
}

// Trip is one round trip with both ends' instants on the merged timeline, ns.
type Trip struct {
	Name       string `json:"name"`
	ClientHost string `json:"client_host"`
	ServerHost string `json:"server_host"`
	ClientConn uint64 `json:"client_conn"`
	ServerConn uint64 `json:"server_conn"`
	ReqStart   int64  `json:"req_start_ns"` // client's first send call began
	ReqSent    int64  `json:"req_sent_ns"`  // client's last send call ended
	SrvRead    int64  `json:"srv_read_ns"`  // server's first receive call for it began
	SrvHas     int64  `json:"srv_has_ns"`   // server's last receive call for it ended
	Arrived    int64  `json:"arrived_ns"`   // estimated arrival on the server's host
	RepStart   int64  `json:"rep_start_ns"` // server's first send call of the reply began
	RepSent    int64  `json:"rep_sent_ns"`  // server's last send call of the reply ended
	CliRead    int64  `json:"cli_read_ns"`  // client's first receive call for the reply began
	Back       int64  `json:"back_ns"`      // estimated arrival of the reply on the client's host
	RepEnd     int64  `json:"rep_end_ns"`   // client's last receive call for the reply ended
	Parts      Parts  `json:"parts_us"`     // the split of this round trip
	// The processes and threads of the four ends: the client's send and receive, the server's
	// receive and send.
	ClientPID uint32 `json:"client_pid"`
	ServerPID uint32 `json:"server_pid"`
	ReqTID    uint32 `json:"req_tid"`
	SrvInTID  uint32 `json:"srv_in_tid"`
	SrvOutTID uint32 `json:"srv_out_tid"`
	RepTID    uint32 `json:"rep_tid"`
	unit      int    // index of its unit of work, -1 none
	// srvPrev and cliPrev are when the server's (client's) previous call on the connection
	// ended before it began reading the request (reply), ns; math.MinInt64 for none.
	srvPrev, cliPrev int64
}

// Quantiles are the 10th, 50th and 90th percentiles of a sample (nearest rank), µs.
type Quantiles struct {
	P10 float64 `json:"p10"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
}

func quantiles(v []float64) Quantiles {
	if len(v) == 0 {
		return Quantiles{}
	}
	sort.Float64s(v)
	at := func(q float64) float64 { return round3(v[int(math.Ceil(q*float64(len(v))))-1]) }
	return Quantiles{P10: at(0.1), P50: at(0.5), P90: at(0.9)}
}

// CommandParts is the mean split of one command's round trips.
type CommandParts struct {
	Name  string `json:"name"`
	Count uint64 `json:"count"`
	Mean  Parts  `json:"mean_us"`
}

// UnitParts is the split of the round trips of one kind of unit of work, summed per unit and
// averaged over the units.
type UnitParts struct {
	Name              string  `json:"name"`
	Count             uint64  `json:"count"`
	RoundTripsPerUnit float64 `json:"round_trips_per_unit"`
	PerUnit           Parts   `json:"per_unit_us"`
}

// SlowestUnitsKept is how many of the slowest units a Report keeps with their round trips, and
// UnitTripsKept how many round trips of each.
const (
	SlowestUnitsKept = 3
	UnitTripsKept    = 200
)

// UnitTrips is one unit of work with its round trips.
type UnitTrips struct {
	Name    string `json:"name"`
	StartNS int64  `json:"start_ns"` // its first round trip's start
	EndNS   int64  `json:"end_ns"`   // its last round trip's end
	Trips   []Trip `json:"trips"`    // in order, at most UnitTripsKept
}

// Host is one input of the merged trace.
type Host struct {
	Input       string `json:"input"`
	Host        string `json:"host"`
	Connections int    `json:"connections"`
	// OffsetUS and its bounds place the host's clock on the reference's (0 for the reference).
	OffsetUS   float64 `json:"offset_us"`
	OffsetLoUS float64 `json:"offset_lo_us"`
	OffsetHiUS float64 `json:"offset_hi_us"`
}

// Report is the decomposition of a merged trace's round trips.
type Report struct {
	Hosts []Host `json:"hosts"`
	// Messages counts every protocol message once, whether one end or both were recorded;
	// BothEnds those whose two ends were matched (same connection, same byte offset).
	Messages uint64 `json:"messages"`
	BothEnds uint64 `json:"messages_both_ends"`
	// RoundTrips is the client round trips split; Unmatched those whose server end was not
	// found (not recorded, or decoded differently at the two ends).
	RoundTrips uint64 `json:"round_trips"`
	Unmatched  uint64 `json:"round_trips_unmatched"`
	// ClockUS is how far each instant on a server's host may be off on the merged timeline, µs
	// (the clock interval of docs/merge.md): NetOut, Queue, Service and NetBack are each exact
	// within ±ClockUS, their sum with the client's time exactly the RTT.
	ClockUS float64 `json:"clock_uncertainty_us"`
	Mean    Parts   `json:"mean_us"` // per round trip
	// NetRTT is the network's part of a round trip (NetOut + NetBack), over the round trips, µs:
	// the link's round-trip time as measured at both ends (what perflab model takes as the
	// baseline link).
	NetRTT   Quantiles      `json:"net_rtt_us"`
	Commands []CommandParts `json:"commands"`
	Units    []UnitParts    `json:"units,omitempty"`
	Slowest  []Trip         `json:"slowest"` // the slowest round trips, slowest first
	// SlowestUnits are the units of work that took longest, slowest first, with their round
	// trips in order (for a swim-lane view).
	SlowestUnits []UnitTrips `json:"slowest_units,omitempty"`
	Warnings     []string    `json:"warnings,omitempty"`
}

// NetworkShare returns the network's part of the mean round trip (NetOut + NetBack) over its
// RTT, 0 when there is none.
func (r *Report) NetworkShare() float64 {
	if r.Mean.RTT <= 0 {
		return 0
	}
	return (r.Mean.NetOut + r.Mean.NetBack) / r.Mean.RTT
}

// endMsgs is one direction of one end: its messages in order, keyed by byte offset.
type endMsgs struct {
	list  []Msg
	byOff map[int64]int
}

func index(ms []Msg, send bool) endMsgs {
	e := endMsgs{byOff: map[int64]int{}}
	var off int64
	for _, m := range ms {
		if m.Send != send {
			continue
		}
		e.byOff[off] = len(e.list)
		e.list = append(e.list, m)
		off += m.Size
	}
	return e
}

// Report decomposes the round trips. unit names the markers that span a unit of work ("" for
// "token"); when the trace has none, requests flagged Unit open the units.
func (b *Builder) Report(unit string) *Report {
	if unit == "" {
		unit = "token"
	}
	r := &Report{Commands: []CommandParts{}, Slowest: []Trip{}}
	for i, c := range b.clocks {
		h := Host{Input: c.Input, Host: c.Host}
		if c.Peer >= 0 {
			h.OffsetUS, h.OffsetLoUS, h.OffsetHiUS = float64(c.OffsetNS)/1e3, float64(c.OffsetLoNS)/1e3, float64(c.OffsetHiNS)/1e3
		}
		for _, id := range b.order {
			if b.host(id) == i {
				h.Connections++
			}
		}
		r.Hosts = append(r.Hosts, h)
	}
	if b.dropped > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d messages past the first %d were not decomposed", b.dropped, MaxMessages))
	}
	paired := map[uint64]bool{}
	var trips []Trip
	for _, p := range b.pairs() {
		paired[p.cl], paired[p.sv] = true, true
		trips = append(trips, b.pairTrips(p, r)...)
	}
	for id, ms := range b.msgs {
		if !paired[id] {
			r.Messages += uint64(len(ms))
		}
	}
	r.ClockUS = b.clockUS(trips)
	b.units(trips, unit)
	r.sum(trips, unit)
	if r.RoundTrips == 0 {
		r.Warnings = append(r.Warnings, "no round trip was seen at both ends (the client's and the server's recordings of one connection): nothing to split")
	}
	if r.Unmatched > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d of %d client round trips had no server end (not recorded there, or the ends decoded the stream differently)", r.Unmatched, r.Unmatched+r.RoundTrips))
	}
	if r.RoundTrips > 0 {
		for _, v := range []struct {
			name string
			us   float64
		}{{"network out", r.Mean.NetOut}, {"server queue", r.Mean.Queue}, {"server service", r.Mean.Service}, {"network back", r.Mean.NetBack}} {
			if v.us < -r.ClockUS-0.5 {
				r.Warnings = append(r.Warnings, fmt.Sprintf("mean %s is %.1f µs, below the clock uncertainty (±%.1f µs): the clocks are placed wrongly or the ends were matched wrongly", v.name, v.us, r.ClockUS))
			}
		}
		if r.ClockUS > 0.25*r.Mean.RTT {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the clock uncertainty (±%.1f µs) is more than a quarter of the mean round trip (%.1f µs): the network and server parts are rough", r.ClockUS, r.Mean.RTT))
		}
	}
	return r
}

// Trips returns every round trip seen at both ends, split, in no particular order (the
// Perfetto export draws them as flows).
func (b *Builder) Trips() []Trip {
	var r Report
	var trips []Trip
	for _, p := range b.pairs() {
		trips = append(trips, b.pairTrips(p, &r)...)
	}
	return trips
}

// pairTrips matches the two ends of pair p's messages, counts them once into r, and returns
// its round trips with both ends' instants (parts not yet split).
func (b *Builder) pairTrips(p pair, r *Report) []Trip {
	cm, sm := b.msgs[p.cl], b.msgs[p.sv]
	cOut, sIn := index(cm, true), index(sm, false)
	sOut, cIn := index(sm, true), index(cm, false)
	for _, d := range [][2]endMsgs{{cOut, sIn}, {sOut, cIn}} {
		both := 0
		for off := range d[0].byOff {
			if _, ok := d[1].byOff[off]; ok {
				both++
			}
		}
		r.Messages += uint64(len(d[0].list) + len(d[1].list) - both)
		r.BothEnds += uint64(both)
	}
	// The client's requests by start, to find each reply's.
	reqAt := map[int64]int64{} // TS → byte offset
	{
		var off int64
		for _, m := range cOut.list {
			if _, dup := reqAt[m.TS]; !dup {
				reqAt[m.TS] = off
			}
			off += m.Size
		}
	}
	sReplyAt := map[int64]int64{} // offset in server's sends → offset of its request in server's receives
	{
		recvAt := map[int64]int64{}
		var off int64
		for _, m := range sIn.list {
			if _, dup := recvAt[m.TS]; !dup {
				recvAt[m.TS] = off
			}
			off += m.Size
		}
		off = 0
		for _, m := range sOut.list {
			if m.Reply && m.ReqTS != 0 {
				if ro, ok := recvAt[m.ReqTS]; ok {
					sReplyAt[off] = ro
				}
			}
			off += m.Size
		}
	}
	cPrev, sPrev := lastEnds(cm), lastEnds(sm)
	ch, sh := b.hostName(p.cl), b.hostName(p.sv)
	var trips []Trip
	var off int64
	for _, rep := range cIn.list {
		roff := off
		off += rep.Size
		if !rep.Reply || rep.ReqTS == 0 {
			continue
		}
		qoff, ok := reqAt[rep.ReqTS]
		if !ok {
			continue
		}
		si, ok1 := sIn.byOff[qoff]
		so, ok2 := sOut.byOff[roff]
		if !ok1 || !ok2 || sReplyAt[roff] != qoff {
			r.Unmatched++
			continue
		}
		req := cOut.list[cOut.byOff[qoff]]
		sreq, srep := sIn.list[si], sOut.list[so]
		trips = append(trips, Trip{Name: rep.Name, ClientHost: ch, ServerHost: sh, ClientConn: p.cl, ServerConn: p.sv,
			ReqStart: req.TS, ReqSent: req.End, SrvRead: sreq.TS, SrvHas: sreq.End,
			RepStart: srep.TS, RepSent: srep.End, CliRead: rep.TS, RepEnd: rep.End, unit: -1,
			srvPrev: sPrev(sreq.TS), cliPrev: cPrev(rep.TS),
			ClientPID: req.PID, ServerPID: sreq.PID, ReqTID: req.TID, SrvInTID: sreq.TID, SrvOutTID: srep.TID, RepTID: rep.TID})
	}
	split(trips)
	return trips
}

// lastEnds returns, for an instant ts, when the last of ms that had ended by ts ended
// (math.MinInt64 when none had).
func lastEnds(ms []Msg) func(ts int64) int64 {
	ends := make([]int64, len(ms))
	for i, m := range ms {
		ends[i] = m.End
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	return func(ts int64) int64 {
		k := sort.Search(len(ends), func(k int) bool { return ends[k] > ts })
		if k == 0 {
			return math.MinInt64
		}
		return ends[k-1]
	}
}

func (b *Builder) hostName(id uint64) string {
	h := b.host(id)
	if h < len(b.clocks) {
		if n := b.clocks[h].Host; n != "" {
			return fmt.Sprintf("%d:%s", h, n)
		}
	}
	return fmt.Sprint(h)
}

// split estimates when each request and reply arrived at the other host and splits the trips
// of one connection. A receiver was waiting for a message when its receive call began before the
// message was sent (a blocking read), or when it had done nothing on the connection since before
// the message was sent (an event loop reads right after the wake-up): the message was on its host
// when the receiver's last call for it ended. A receiver that was busy on the connection (an
// earlier reply still going out, pipelined requests) found the message waiting: it is taken to
// have arrived after the fastest one-way delay seen on the connection in that direction among
// the waited-for messages, and the rest until the read is queue (server) or the client's.
func split(trips []Trip) {
	waitedOut := func(t *Trip) bool { return t.SrvRead <= t.ReqSent || t.srvPrev <= t.ReqSent }
	waitedBack := func(t *Trip) bool { return t.CliRead <= t.RepSent || t.cliPrev <= t.RepSent }
	floorOut, floorBack := int64(math.MaxInt64), int64(math.MaxInt64)
	for i := range trips {
		t := &trips[i]
		if waitedOut(t) {
			floorOut = min(floorOut, t.SrvHas-t.ReqSent)
		}
		if waitedBack(t) {
			floorBack = min(floorBack, t.RepEnd-t.RepSent)
		}
	}
	if floorOut == math.MaxInt64 {
		floorOut = 0
	}
	if floorBack == math.MaxInt64 {
		floorBack = 0
	}
	floorOut, floorBack = max(0, floorOut), max(0, floorBack)
	for i := range trips {
		t := &trips[i]
		if waitedOut(t) {
			t.Arrived = t.SrvHas
		} else {
			t.Arrived = min(t.SrvHas, t.ReqSent+floorOut)
		}
		if waitedBack(t) {
			t.Back = t.RepEnd
		} else {
			t.Back = min(t.RepEnd, t.RepSent+floorBack)
		}
		start := max(t.Arrived, t.SrvRead) // the server began on it
		us := func(ns int64) float64 { return float64(ns) / 1e3 }
		t.Parts = Parts{
			RTT:     us(t.RepEnd - t.ReqStart),
			Client:  us(t.ReqSent - t.ReqStart + t.RepEnd - t.Back),
			NetOut:  us(t.Arrived - t.ReqSent),
			Queue:   us(start - t.Arrived),
			Service: us(t.RepSent - start),
			NetBack: us(t.Back - t.RepSent),
		}
	}
}

// clockUS returns how far the placement of the trips' hosts may be off, µs: each non-reference
// host's offset interval plus its drift interval over the trips' span around its pivot.
func (b *Builder) clockUS(trips []Trip) float64 {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, t := range trips {
		lo, hi = min(lo, t.ReqStart), max(hi, t.RepEnd)
	}
	var worst float64
	for _, c := range b.clocks {
		if c.Peer < 0 || lo > hi {
			continue
		}
		off := math.Max(float64(c.OffsetNS-c.OffsetLoNS), float64(c.OffsetHiNS-c.OffsetNS))
		span := math.Max(math.Abs(float64(lo-c.RefNS)), math.Abs(float64(hi-c.RefNS)))
		drift := math.Max(c.DriftPPM-c.DriftLoPPM, c.DriftHiPPM-c.DriftPPM) * 1e-6 * span
		worst = math.Max(worst, off+drift)
	}
	return round3(worst / 1e3)
}

// units assigns each trip to the unit of work its request began in: the marker named unit that
// spans it, or else the last unit-opening request before it on its client connection's host.
func (b *Builder) units(trips []Trip, unit string) {
	var spans []trace.Marker
	for _, m := range b.marks {
		if m.Name == unit {
			spans = append(spans, m)
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].TS < spans[j].TS })
	if len(spans) > 0 {
		for i := range trips {
			k := sort.Search(len(spans), func(k int) bool { return spans[k].TS > trips[i].ReqStart }) - 1
			if k >= 0 && trips[i].ReqStart < spans[k].TS+spans[k].Dur {
				trips[i].unit = k
			}
		}
		return
	}
	var starts []int64
	for _, ms := range b.msgs {
		for _, m := range ms {
			if m.Unit && m.Send {
				starts = append(starts, m.TS)
			}
		}
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i := range trips {
		trips[i].unit = sort.Search(len(starts), func(k int) bool { return starts[k] > trips[i].ReqStart }) - 1
	}
}

// sum fills the report's means, commands, units and slowest trips.
func (r *Report) sum(trips []Trip, unit string) {
	r.RoundTrips = uint64(len(trips))
	if len(trips) == 0 {
		return
	}
	var all Parts
	net := make([]float64, len(trips))
	for i, t := range trips {
		net[i] = t.Parts.NetOut + t.Parts.NetBack
	}
	r.NetRTT = quantiles(net)
	byName := map[string]*CommandParts{}
	sums := map[string]*Parts{}
	unitSum := map[int]*Parts{}
	unitTrips := map[int]int{}
	for _, t := range trips {
		all.add(t.Parts)
		c := byName[t.Name]
		if c == nil {
			c = &CommandParts{Name: t.Name}
			byName[t.Name] = c
			sums[t.Name] = &Parts{}
		}
		c.Count++
		sums[t.Name].add(t.Parts)
		if t.unit >= 0 {
			if unitSum[t.unit] == nil {
				unitSum[t.unit] = &Parts{}
			}
			unitSum[t.unit].add(t.Parts)
			unitTrips[t.unit]++
		}
	}
	r.Mean = all.scale(1 / float64(len(trips)))
	for name, c := range byName {
		c.Mean = sums[name].scale(1 / float64(c.Count))
		r.Commands = append(r.Commands, *c)
	}
	sort.Slice(r.Commands, func(i, j int) bool {
		a, b := r.Commands[i], r.Commands[j]
		if ta, tb := a.Mean.RTT*float64(a.Count), b.Mean.RTT*float64(b.Count); ta != tb {
			return ta > tb
		}
		return a.Name < b.Name
	})
	if len(unitSum) > 0 {
		var per Parts
		n := 0
		for k, s := range unitSum {
			per.add(*s)
			n += unitTrips[k]
		}
		u := float64(len(unitSum))
		r.Units = []UnitParts{{Name: unit, Count: uint64(len(unitSum)), RoundTripsPerUnit: round3(float64(n) / u), PerUnit: per.scale(1 / u)}}
	}
	r.slowestUnits(trips, unit)
	idx := make([]int, len(trips))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool {
		ta, tb := trips[idx[a]], trips[idx[b]]
		if ta.Parts.RTT != tb.Parts.RTT {
			return ta.Parts.RTT > tb.Parts.RTT
		}
		return ta.ReqStart < tb.ReqStart
	})
	for _, i := range idx[:min(len(idx), SlowestKept)] {
		r.Slowest = append(r.Slowest, trips[i])
	}
}

// slowestUnits keeps the units of work whose round trips spanned the longest.
func (r *Report) slowestUnits(trips []Trip, unit string) {
	by := map[int]*UnitTrips{}
	var all []*UnitTrips
	for _, t := range trips {
		if t.unit < 0 {
			continue
		}
		u := by[t.unit]
		if u == nil {
			u = &UnitTrips{Name: unit, StartNS: t.ReqStart, EndNS: t.RepEnd}
			by[t.unit] = u
			all = append(all, u)
		}
		u.StartNS, u.EndNS = min(u.StartNS, t.ReqStart), max(u.EndNS, t.RepEnd)
		if len(u.Trips) < UnitTripsKept {
			u.Trips = append(u.Trips, t)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		di, dj := all[i].EndNS-all[i].StartNS, all[j].EndNS-all[j].StartNS
		if di != dj {
			return di > dj
		}
		return all[i].StartNS < all[j].StartNS
	})
	for _, u := range all[:min(len(all), SlowestUnitsKept)] {
		sort.Slice(u.Trips, func(i, j int) bool { return u.Trips[i].ReqStart < u.Trips[j].ReqStart })
		r.SlowestUnits = append(r.SlowestUnits, *u)
	}
}

// round3 rounds v (µs) to the ns.
func round3(v float64) float64 { return math.Round(v*1e3) / 1e3 }
