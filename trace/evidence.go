package trace

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// SchedInfo is the payload of an OpRunnable event: where and why a recorded thread waited for
// a CPU. The event's TS is when it became runnable (woken, or preempted while running), its Dur
// how long it waited before it ran, in ns.
type SchedInfo struct {
	CPU   uint16 // the CPU it ran on
	Flags uint8  // SchedIdle, SchedPreempted, SchedNew
	Waker uint32 // process (tgid) that woke it; 0 for an interrupt or when preempted
}

// SchedInfo flags.
const (
	SchedIdle      = 1 << 0 // the CPU ran its idle task until the thread ran: a halted CPU woke up for it
	SchedPreempted = 1 << 1 // runnable because it was preempted, not woken
	SchedNew       = 1 << 2 // a new thread's first run
)

// SchedInfoSize is the size of an encoded SchedInfo, bytes.
const SchedInfoSize = 8

var errEvidence = errors.New("evidence payload too short")

// AppendSchedInfo appends s encoded (SchedInfoSize bytes, little-endian) to b.
func AppendSchedInfo(b []byte, s SchedInfo) []byte {
	b = binary.LittleEndian.AppendUint16(b, s.CPU)
	b = append(b, s.Flags, 0)
	return binary.LittleEndian.AppendUint32(b, s.Waker)
}

// DecodeSchedInfo decodes an OpRunnable event's payload.
func DecodeSchedInfo(p []byte) (SchedInfo, error) {
	if len(p) < SchedInfoSize {
		return SchedInfo{}, errEvidence
	}
	le := binary.LittleEndian
	return SchedInfo{CPU: le.Uint16(p), Flags: p[2], Waker: le.Uint32(p[4:])}, nil
}

// TCPInfo is the payload of the OpTCPState, OpTCPRetransmit and OpTCPInfo events: a TCP
// connection's state at the event's TS, as the kernel keeps it.
type TCPInfo struct {
	OldState, State uint8  // TCP states as Linux numbers them (TCPEstablished...); equal but for OpTCPState
	SRTTus          uint32 // smoothed RTT, µs
	Cwnd            uint32 // congestion window, segments
	SndWnd          uint32 // the peer's receive window, bytes (0: a zero window)
	RcvWnd          uint32 // our receive window, bytes
	TotalRetrans    uint32 // segments retransmitted since the connection opened
	LostOut         uint32 // segments thought lost
	RetransOut      uint32 // retransmitted segments not yet acknowledged
	MSS             uint32 // bytes
	BytesAcked      uint64 // bytes sent and acknowledged
	BytesReceived   uint64 // bytes received
	LPort, RPort    uint16
	SegsOut         uint32 // segments sent
}

// TCPInfoSize is the size of an encoded TCPInfo, bytes.
const TCPInfoSize = 58

// TCP states as Linux numbers them (include/net/tcp_states.h).
const (
	TCPEstablished = 1
	TCPSynSent     = 2
	TCPSynRecv     = 3
	TCPFinWait1    = 4
	TCPFinWait2    = 5
	TCPTimeWait    = 6
	TCPClose       = 7
	TCPCloseWait   = 8
	TCPLastAck     = 9
	TCPListen      = 10
	TCPClosing     = 11
)

var tcpStateNames = [...]string{"", "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2",
	"TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING"}

// TCPStateName names a TCP state: "ESTABLISHED", or "state N" for one Linux does not have.
func TCPStateName(s uint8) string {
	if s > 0 && int(s) < len(tcpStateNames) {
		return tcpStateNames[s]
	}
	return "state " + strconv.Itoa(int(s))
}

// AppendTCPInfo appends t encoded (TCPInfoSize bytes, little-endian) to b.
func AppendTCPInfo(b []byte, t TCPInfo) []byte {
	le := binary.LittleEndian
	b = append(b, t.OldState, t.State)
	for _, v := range [...]uint32{t.SRTTus, t.Cwnd, t.SndWnd, t.RcvWnd, t.TotalRetrans, t.LostOut, t.RetransOut, t.MSS} {
		b = le.AppendUint32(b, v)
	}
	b = le.AppendUint64(b, t.BytesAcked)
	b = le.AppendUint64(b, t.BytesReceived)
	b = le.AppendUint16(b, t.LPort)
	b = le.AppendUint16(b, t.RPort)
	return le.AppendUint32(b, t.SegsOut)
}

// DecodeTCPInfo decodes the payload of a TCP evidence event.
func DecodeTCPInfo(p []byte) (TCPInfo, error) {
	if len(p) < TCPInfoSize {
		return TCPInfo{}, errEvidence
	}
	le := binary.LittleEndian
	var t TCPInfo
	t.OldState, t.State = p[0], p[1]
	u := func(i int) uint32 { return le.Uint32(p[2+4*i:]) }
	t.SRTTus, t.Cwnd, t.SndWnd, t.RcvWnd = u(0), u(1), u(2), u(3)
	t.TotalRetrans, t.LostOut, t.RetransOut, t.MSS = u(4), u(5), u(6), u(7)
	t.BytesAcked = le.Uint64(p[34:])
	t.BytesReceived = le.Uint64(p[42:])
	t.LPort = le.Uint16(p[50:])
	t.RPort = le.Uint16(p[52:])
	t.SegsOut = le.Uint32(p[54:])
	return t, nil
}

// IsEvidence reports whether op is a kernel evidence op (not a message).
func (o Op) IsEvidence() bool {
	return o >= OpRunnable && o <= OpTCPInfo
}
