package evidence

import (
	"fmt"
	"sort"

	"github.com/perflab/perflab/trace"
)

// Report is what the evidence says: `perflab analyze --format json` field "evidence". Fields may
// be added, never renamed. Durations end in _us.
type Report struct {
	// Parts lists the kinds of kernel evidence the traces hold: "sched", "tcp", "conn".
	Parts []string `json:"parts"`
	// Attribution is where the client round trips' time went; nil without client round trips.
	Attribution *Attribution `json:"attribution,omitempty"`
	// Sched sums the recorded threads' runnable stretches (as runqlat does); nil without sched
	// evidence.
	Sched *Sched `json:"sched,omitempty"`
	// TCP lists the TCP connections with kernel state (as ss -ti would show them at the end).
	TCP []TCPConn `json:"tcp,omitempty"`
	// Setup is the connect latency of the connections the recorded processes opened (as
	// tcpconnlat measures it: SYN sent to established); nil when none was seen opening.
	Setup *Setup `json:"connection_setup,omitempty"`
	// Lifetimes lists the connections seen closing (as tcplife does).
	Lifetimes []Lifetime `json:"connection_lifetimes,omitempty"`
	// Findings are what the evidence says to change, costliest first.
	Findings []Finding `json:"findings"`
	// Notes say what the evidence could not tell (no scheduler evidence, waiting not split).
	Notes []string `json:"notes,omitempty"`
}

// Attribution is where the client round trips' time went, overall and per command.
type Attribution struct {
	RoundTrips uint64  `json:"round_trips"`
	Causes     []Cause `json:"causes"` // every cause, in table order
	// NoWakeup counts the round trips in which the receiving thread was never made runnable
	// (it did not sleep: the reply was there, or it spun): no wake-up or run-queue time.
	NoWakeup uint64 `json:"no_wakeup"`
	// SchedKnown is false when the traces hold no scheduler evidence: then the wake-up and
	// run-queue time is inside "waiting" and "read".
	SchedKnown bool `json:"sched_known"`
	// ServerKnown is set when the waiting is split into network and server (a merged trace
	// of both hosts, perflab merge): WaitingNetworkUS and WaitingServerUS are then the mean
	// network (out and back) and server (queue and service) time of a round trip, µs.
	ServerKnown      bool        `json:"server_known"`
	WaitingNetworkUS float64     `json:"waiting_network_us,omitempty"`
	WaitingServerUS  float64     `json:"waiting_server_us,omitempty"`
	Commands         []CmdCauses `json:"commands"`
}

// Cause is one cause's part of the time.
type Cause struct {
	Cause   string  `json:"cause"`
	TotalUS float64 `json:"total_us"`
	MeanUS  float64 `json:"mean_us"` // per round trip
	Share   float64 `json:"share"`   // of the time attributed, 0..1
}

// CmdCauses is the attribution of one command's round trips.
type CmdCauses struct {
	Command    string  `json:"command"`
	RoundTrips uint64  `json:"round_trips"`
	Causes     []Cause `json:"causes"`
}

// Sched sums the runnable stretches of the recorded threads.
type Sched struct {
	Stretches uint64  `json:"stretches"`
	P50US     float64 `json:"p50_us"`
	P99US     float64 `json:"p99_us"`
	MaxUS     float64 `json:"max_us"`
	// WokenIdle are wake-ups on a CPU that was idle (the CPU itself woke up), WokenBusy on a
	// CPU running something else (the run queue), Preempted runnable after a preemption.
	WokenIdle    uint64  `json:"woken_idle"`
	WokenIdleP50 float64 `json:"woken_idle_p50_us"`
	WokenBusy    uint64  `json:"woken_busy"`
	WokenBusyP50 float64 `json:"woken_busy_p50_us"`
	Preempted    uint64  `json:"preempted"`
	PreemptedP50 float64 `json:"preempted_p50_us"`
}

// TCPConn is one TCP connection's kernel statistics.
type TCPConn struct {
	Trace        int     `json:"trace"`
	ID           uint64  `json:"id"`
	PID          uint32  `json:"pid"`
	Local        string  `json:"local,omitempty"`
	Remote       string  `json:"remote,omitempty"`
	State        string  `json:"state"`                 // the last state seen
	SRTTUS       float64 `json:"srtt_us"`               // the last smoothed RTT
	SRTTP50US    float64 `json:"srtt_p50_us,omitempty"` // over the snapshots
	Cwnd         uint32  `json:"cwnd"`                  // segments
	MSS          uint32  `json:"mss"`
	Retransmits  uint64  `json:"retransmits"`   // retransmission events seen
	TotalRetrans uint32  `json:"total_retrans"` // the kernel's count
	ZeroWindows  uint64  `json:"zero_windows"`  // snapshots with the peer's window at 0
	BytesAcked   uint64  `json:"bytes_acked"`
	BytesRecv    uint64  `json:"bytes_received"`
	Snapshots    uint64  `json:"snapshots"`
}

// Setup is the connect latency of the connections opened.
type Setup struct {
	Connects uint64  `json:"connects"`
	P50US    float64 `json:"p50_us"`
	P99US    float64 `json:"p99_us"`
	MaxUS    float64 `json:"max_us"`
	// Accepted counts connections accepted by a recorded process; AcceptWaitP50US is the
	// median time from established to the first message the process moved on one.
	Accepted        uint64  `json:"accepted"`
	AcceptWaitP50US float64 `json:"accept_wait_p50_us,omitempty"`
}

// Lifetime is one connection from its opening to its close (tcplife).
type Lifetime struct {
	Trace     int     `json:"trace"`
	ID        uint64  `json:"id"`
	PID       uint32  `json:"pid"`
	Local     string  `json:"local,omitempty"`
	Remote    string  `json:"remote,omitempty"`
	Passive   bool    `json:"passive"` // accepted, not connected
	ConnectUS float64 `json:"connect_us,omitempty"`
	LifeMS    float64 `json:"life_ms"`
	TxBytes   uint64  `json:"tx_bytes"`
	RxBytes   uint64  `json:"rx_bytes"`
	Messages  uint64  `json:"messages"`
}

// Finding is one thing to change, with its evidence, what it costs and the fix.
type Finding struct {
	Kind     string `json:"kind"`     // wakeup_delay, split_writes, polling_storm, nagle_delayed_ack, eagain_storm, reconnection_churn, serial_round_trips
	Title    string `json:"title"`    // one line
	Evidence string `json:"evidence"` // the numbers behind it
	// Cost is what it costs per unit of work, in words; CostUSPerUnit and CallsPerUnit give
	// it as numbers where they apply, per Unit ("token", "round trip", ...).
	Cost          string  `json:"cost"`
	Unit          string  `json:"unit"`
	CostUSPerUnit float64 `json:"cost_us_per_unit,omitempty"`
	CallsPerUnit  float64 `json:"calls_per_unit,omitempty"`
	Fix           string  `json:"fix"`
	// Share is the part of the round-trip time it accounts for, 0..1, where that applies.
	Share float64 `json:"share,omitempty"`
}

// Result returns the report. unit is the unit of work findings are costed in (none: per
// round trip).
func (a *Analyzer) Result(unit Unit) *Report {
	r := &Report{Parts: []string{}, Findings: []Finding{}}
	if a.haveSched {
		r.Parts = append(r.Parts, "sched")
	}
	if a.haveTCP {
		r.Parts = append(r.Parts, "tcp")
	}
	if a.haveConn {
		r.Parts = append(r.Parts, "conn")
	}
	at := &a.attr
	if at.n > 0 {
		r.Attribution = &Attribution{RoundTrips: at.n, Causes: causes(at.total, at.n), NoWakeup: at.noWake,
			SchedKnown: at.haveSched, Commands: []CmdCauses{}}
		order := append([]string(nil), at.cmdOrder...)
		sort.SliceStable(order, func(i, j int) bool { return sum(at.byCmd[order[i]].sums) > sum(at.byCmd[order[j]].sums) })
		for _, name := range order {
			ca := at.byCmd[name]
			r.Attribution.Commands = append(r.Attribution.Commands, CmdCauses{Command: name, RoundTrips: ca.n, Causes: causes(ca.sums, ca.n)})
		}
		if !at.haveSched {
			r.Notes = append(r.Notes, "no scheduler evidence in the trace: wake-up and run-queue time is counted in waiting (record with --evidence sched)")
		}
	}
	if a.runnable.n > 0 {
		r.Sched = &Sched{Stretches: a.runnable.n, P50US: us(a.runnable.quantile(0.5)), P99US: us(a.runnable.quantile(0.99)),
			MaxUS: us(float64(a.runnable.max)), WokenIdle: a.wakeIdle.n, WokenIdleP50: us(a.wakeIdle.quantile(0.5)),
			WokenBusy: a.wakeBusy.n, WokenBusyP50: us(a.wakeBusy.quantile(0.5)), Preempted: a.preempted.n, PreemptedP50: us(a.preempted.quantile(0.5))}
	}
	var connect, acceptWait hist
	var accepted uint64
	for _, cs := range a.allConns {
		c := cs.tcp
		if c == nil {
			continue
		}
		if cs.family == trace.FamilyTCP && (c.haveInfo || c.retrans > 0) {
			tc := TCPConn{Trace: cs.trace, ID: cs.id, PID: cs.pid, Local: cs.local, Remote: cs.remote, State: trace.TCPStateName(c.info.State),
				SRTTUS: float64(c.info.SRTTus), SRTTP50US: us(c.srtt.quantile(0.5)), Cwnd: c.info.Cwnd, MSS: c.info.MSS,
				Retransmits: c.retrans, TotalRetrans: c.info.TotalRetrans, ZeroWindows: c.zeroWnd,
				BytesAcked: c.info.BytesAcked, BytesRecv: c.info.BytesReceived, Snapshots: c.snaps}
			r.TCP = append(r.TCP, tc)
		}
		if c.synSent > 0 && c.established > c.synSent {
			connect.add(c.established - c.synSent)
		}
		if c.passive && c.established > 0 {
			accepted++
			if cs.firstData >= c.established {
				acceptWait.add(cs.firstData - c.established)
			}
		}
		if c.closed > 0 {
			open := c.synSent
			if open == 0 {
				open = c.established
			}
			if open > 0 && c.closed >= open {
				l := Lifetime{Trace: cs.trace, ID: cs.id, PID: cs.pid, Local: cs.local, Remote: cs.remote, Passive: c.passive,
					LifeMS: round3(float64(c.closed-open) / 1e6), TxBytes: c.info.BytesAcked, RxBytes: c.info.BytesReceived, Messages: cs.messages}
				if c.synSent > 0 && c.established > c.synSent {
					l.ConnectUS = us(float64(c.established - c.synSent))
				}
				r.Lifetimes = append(r.Lifetimes, l)
			}
		}
	}
	if connect.n > 0 || accepted > 0 {
		r.Setup = &Setup{Connects: connect.n, P50US: us(connect.quantile(0.5)), P99US: us(connect.quantile(0.99)), MaxUS: us(float64(connect.max)),
			Accepted: accepted, AcceptWaitP50US: us(acceptWait.quantile(0.5))}
	}
	r.Findings = a.findings(unit, r)
	return r
}

// SplitWaiting splits the attribution's waiting into network and server by the two-host
// decomposition of a merged trace: the mean network (out and back) and server (queue and
// service) time of a round trip, µs.
func (r *Report) SplitWaiting(networkUS, serverUS float64) {
	a := r.Attribution
	if a == nil || networkUS < 0 || serverUS < 0 {
		return
	}
	a.ServerKnown = true
	a.WaitingNetworkUS, a.WaitingServerUS = round3(networkUS), round3(serverUS)
	r.Notes = append(r.Notes, fmt.Sprintf("waiting, split by both hosts' recordings: network %.1f µs and server %.1f µs per round trip (perflab merge)", networkUS, serverUS))
}

func sum(s causeSums) float64 {
	var t float64
	for _, v := range s {
		t += v
	}
	return t
}

func causes(s causeSums, n uint64) []Cause {
	total := sum(s)
	out := make([]Cause, nCauses)
	for i, name := range Causes {
		out[i] = Cause{Cause: name, TotalUS: us(s[i]), MeanUS: us(s[i] / float64(max(n, 1)))}
		if total > 0 {
			out[i].Share = round3(s[i] / total)
		}
	}
	return out
}

// perRT gives a total over n round trips per unit of work (per round trip without units).
func perRT(total float64, n uint64, unit Unit) (float64, string) {
	return per(total, n, unit.RoundTripsPerUnit, unit, "round trip")
}

// perReq gives a total over n requests per unit of work (per request without units).
func perReq(total float64, n uint64, unit Unit) (float64, string) {
	return per(total, n, unit.RequestsPerUnit, unit, "request")
}

// per gives total/n per thing, times things per unit when the unit is known.
func per(total float64, n uint64, perUnit float64, unit Unit, thing string) (float64, string) {
	if n == 0 {
		return 0, thing
	}
	v := total / float64(n)
	if unit.Name != "" && unit.Count > 0 && perUnit > 0 {
		return v * perUnit, unit.Name
	}
	return v, thing
}
