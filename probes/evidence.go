package probes

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/perflab/perflab/trace"
)

// Evidence selects the kernel evidence parts record captures next to the socket messages
// (bpf/evidence.bpf.c), as a bit set.
type Evidence uint8

// Evidence parts.
const (
	// EvidenceSched: when each recorded thread became runnable and when it ran (run-queue and
	// wake-up delay), on which CPU and whether that CPU was idle.
	EvidenceSched Evidence = 1 << iota
	// EvidenceTCP: retransmissions of recorded TCP connections, and their state (srtt, cwnd,
	// windows) sampled as recorded threads read from them.
	EvidenceTCP
	// EvidenceConn: TCP state changes of recorded connections: connect, accept, close.
	EvidenceConn

	// EvidenceAll is every part.
	EvidenceAll = EvidenceSched | EvidenceTCP | EvidenceConn
)

var evidenceNames = []struct {
	name string
	part Evidence
}{{"sched", EvidenceSched}, {"tcp", EvidenceTCP}, {"conn", EvidenceConn}}

// ParseEvidence parses a comma-separated list of parts: "sched,tcp,conn", "all" or "none".
func ParseEvidence(s string) (Evidence, error) {
	var e Evidence
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch f {
		case "all":
			e |= EvidenceAll
			continue
		case "none", "":
			continue
		}
		found := false
		for _, n := range evidenceNames {
			if n.name == f {
				e |= n.part
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown evidence part %q (want sched, tcp, conn, all or none)", f)
		}
	}
	return e, nil
}

// String lists the parts: "sched,tcp,conn", or "none".
func (e Evidence) String() string {
	var parts []string
	for _, n := range evidenceNames {
		if e&n.part != 0 {
			parts = append(parts, n.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Record kinds written by bpf/evidence.bpf.c (enum kind of bpf/common.h).
const (
	kindSched = 5
	kindTCP   = 6
)

// Counter slots of the evidence (enum counter of bpf/common.h).
const (
	cntEvLost  = 8
	cntEvSched = 9
	cntEvTCP   = 10
)

// Sizes of struct sched_rec and struct tcp_rec of bpf/evidence.bpf.c.
const (
	schedRecSize = 32
	tcpRecSize   = 80
)

// What a tcp record reports (enum tcp_what).
const (
	tcpWhatState   = 1
	tcpWhatRetrans = 2
	tcpWhatSnap    = 3
)

// rawSched is struct sched_rec, decoded.
type rawSched struct {
	Flags  uint8
	CPU    uint16
	PID    uint32
	TID    uint32
	Waker  uint32
	WakeTS uint64
	RunTS  uint64
}

// rawTCP is struct tcp_rec, decoded.
type rawTCP struct {
	What   uint8
	PID    uint32
	TS     uint64
	Cookie uint64
	Info   trace.TCPInfo
}

func decodeSched(b []byte, r *rawSched) error {
	if len(b) < schedRecSize || b[0] != kindSched {
		return fmt.Errorf("decode sched record: %w (%d bytes)", errShort, len(b))
	}
	le := binary.LittleEndian
	*r = rawSched{Flags: b[1], CPU: le.Uint16(b[2:]), PID: le.Uint32(b[4:]), TID: le.Uint32(b[8:]),
		Waker: le.Uint32(b[12:]), WakeTS: le.Uint64(b[16:]), RunTS: le.Uint64(b[24:])}
	if r.RunTS < r.WakeTS {
		return fmt.Errorf("decode sched record: ran at %d before runnable at %d", r.RunTS, r.WakeTS)
	}
	if r.RunTS > math.MaxInt64 {
		return fmt.Errorf("decode sched record: ran at %d, past a trace's timestamps", r.RunTS)
	}
	return nil
}

func decodeTCP(b []byte, r *rawTCP) error {
	if len(b) < tcpRecSize || b[0] != kindTCP {
		return fmt.Errorf("decode tcp record: %w (%d bytes)", errShort, len(b))
	}
	le := binary.LittleEndian
	r.What = b[1]
	if r.What < tcpWhatState || r.What > tcpWhatSnap {
		return fmt.Errorf("decode tcp record: kind of report %d", r.What)
	}
	r.PID = le.Uint32(b[4:])
	r.TS = le.Uint64(b[8:])
	r.Cookie = le.Uint64(b[16:])
	u := func(off int) uint32 { return le.Uint32(b[off:]) }
	r.Info = trace.TCPInfo{OldState: b[2], State: b[3],
		SRTTus: u(24), Cwnd: u(28), SndWnd: u(32), RcvWnd: u(36),
		TotalRetrans: u(40), LostOut: u(44), RetransOut: u(48), MSS: u(52),
		BytesAcked: le.Uint64(b[56:]), BytesReceived: le.Uint64(b[64:]),
		LPort: le.Uint16(b[72:]), RPort: le.Uint16(b[74:]), SegsOut: u(76)}
	return nil
}

// schedEvent converts a sched record into an OpRunnable event; its payload is appended to buf.
func schedEvent(r *rawSched, buf []byte, e *trace.Event) []byte {
	buf = trace.AppendSchedInfo(buf[:0], trace.SchedInfo{CPU: r.CPU, Flags: r.Flags, Waker: r.Waker})
	*e = trace.Event{TS: int64(r.WakeTS), Dur: int64(r.RunTS - r.WakeTS), PID: r.PID, TID: r.TID,
		Op: trace.OpRunnable, Source: trace.SourceEBPF, Payload: buf}
	return buf
}

// tcpEvent converts a tcp record into a TCP evidence event of connection conn; its payload is
// appended to buf.
func tcpEvent(r *rawTCP, conn uint64, pid uint32, buf []byte, e *trace.Event) []byte {
	op := trace.OpTCPInfo
	switch r.What {
	case tcpWhatState:
		op = trace.OpTCPState
	case tcpWhatRetrans:
		op = trace.OpTCPRetransmit
	}
	buf = trace.AppendTCPInfo(buf[:0], r.Info)
	*e = trace.Event{TS: int64(r.TS), PID: pid, Conn: conn, Op: op, Source: trace.SourceEBPF, Payload: buf}
	return buf
}
