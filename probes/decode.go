package probes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/perflab/perflab/trace"
)

// Record kinds written by bpf/record.bpf.c.
const (
	kindEvent  = 1
	kindConn   = 2
	kindWait   = 3 // bpf/loop.bpf.c: a struct event of a wait call
	kindUEvent = 4 // bpf/uprobe.bpf.c: struct uevent
)

// Sizes of the fixed parts of the records (struct event and struct conn in bpf/record.bpf.c).
const (
	eventHeaderSize = 56
	connSize        = 288
	uEventSize      = 56 // struct uevent
	unixPathMax     = 108
)

// Address families and protocols as the kernel numbers them.
const (
	afUnix      = 1
	afInet      = 2
	afInet6     = 10
	afNetlink   = 16
	ipprotoTCP  = 6
	ipprotoUDP  = 17
	sockStream  = 1
	sockDgram   = 2
	sockSeqpack = 5
)

var errShort = errors.New("record too short")

// rawEvent is struct event of bpf/record.bpf.c, decoded.
type rawEvent struct {
	Op      uint8
	Family  uint16
	NMsgs   uint16
	PID     uint32
	TID     uint32
	TS      uint64 // CLOCK_MONOTONIC ns at entry
	Dur     uint64 // ns
	Cookie  uint64 // socket cookie
	Ret     int64  // bytes moved, or -errno
	FD      uint32
	Payload []byte // aliases the record
}

// rawConn is struct conn of bpf/record.bpf.c, decoded.
type rawConn struct {
	Family   uint16
	Protocol uint16
	Type     uint16
	PID      uint32
	LPort    uint16
	RPort    uint16
	Cookie   uint64
	TS       uint64
	LAddr    [16]byte
	RAddr    [16]byte
	LPath    []byte // aliases the record
	RPath    []byte
}

// decodeKind returns the kind of a ring-buffer record.
func decodeKind(b []byte) (uint8, error) {
	if len(b) == 0 {
		return 0, errShort
	}
	return b[0], nil
}

// decodeEvent decodes an event record. The payload aliases b.
func decodeEvent(b []byte, e *rawEvent) error { return decodeEventKind(b, kindEvent, e) }

// decodeWait decodes a wait-call record of the loop probe: an event record of kind kindWait,
// with a wait op and no payload.
func decodeWait(b []byte, e *rawEvent) error {
	if err := decodeEventKind(b, kindWait, e); err != nil {
		return err
	}
	if !trace.Op(e.Op).IsWait() || len(e.Payload) != 0 {
		return fmt.Errorf("decode wait: op %d with %d payload bytes", e.Op, len(e.Payload))
	}
	return nil
}

func decodeEventKind(b []byte, kind uint8, e *rawEvent) error {
	if len(b) < eventHeaderSize {
		return fmt.Errorf("decode event: %w (%d bytes)", errShort, len(b))
	}
	le := binary.LittleEndian
	if b[0] != kind {
		return fmt.Errorf("decode event: kind %d", b[0])
	}
	e.Op = b[1]
	e.Family = le.Uint16(b[2:])
	plen := int(le.Uint16(b[4:]))
	e.NMsgs = le.Uint16(b[6:])
	e.PID = le.Uint32(b[8:])
	e.TID = le.Uint32(b[12:])
	e.TS = le.Uint64(b[16:])
	e.Dur = le.Uint64(b[24:])
	e.Cookie = le.Uint64(b[32:])
	e.Ret = int64(le.Uint64(b[40:]))
	e.FD = le.Uint32(b[48:])
	if plen > trace.MaxPayload || plen > len(b)-eventHeaderSize {
		return fmt.Errorf("decode event: payload length %d with %d bytes left", plen, len(b)-eventHeaderSize)
	}
	e.Payload = b[eventHeaderSize : eventHeaderSize+plen]
	return nil
}

// decodeConn decodes a connection record. The paths alias b.
func decodeConn(b []byte, c *rawConn) error {
	if len(b) < connSize {
		return fmt.Errorf("decode connection: %w (%d bytes)", errShort, len(b))
	}
	le := binary.LittleEndian
	if b[0] != kindConn {
		return fmt.Errorf("decode connection: kind %d", b[0])
	}
	c.Family = le.Uint16(b[2:])
	c.Protocol = le.Uint16(b[4:])
	c.Type = le.Uint16(b[6:])
	c.PID = le.Uint32(b[8:])
	c.LPort = le.Uint16(b[12:])
	c.RPort = le.Uint16(b[14:])
	c.Cookie = le.Uint64(b[16:])
	c.TS = le.Uint64(b[24:])
	copy(c.LAddr[:], b[32:48])
	copy(c.RAddr[:], b[48:64])
	ll := int(le.Uint16(b[64:]))
	rl := int(le.Uint16(b[66:]))
	if ll > unixPathMax || rl > unixPathMax {
		return fmt.Errorf("decode connection: unix path lengths %d, %d over %d", ll, rl, unixPathMax)
	}
	c.LPath = b[72 : 72+ll]
	c.RPath = b[72+unixPathMax : 72+unixPathMax+rl]
	return nil
}

// opDir returns the direction of a system call op.
func opDir(op trace.Op) trace.Dir {
	switch op {
	case trace.OpSendto, trace.OpSendmsg, trace.OpSendmmsg, trace.OpWrite, trace.OpWritev:
		return trace.DirSend
	case trace.OpRecvfrom, trace.OpRecvmsg, trace.OpRecvmmsg, trace.OpRead, trace.OpReadv:
		return trace.DirRecv
	}
	return trace.DirNone
}

// toEvent converts a raw event into a trace event for connection id conn. The payload aliases r.
func toEvent(r *rawEvent, conn uint64, e *trace.Event) {
	op := trace.Op(r.Op)
	if (op < trace.OpSendto || op > trace.OpWritev) && !op.IsWait() {
		op = trace.OpUnknown
	}
	*e = trace.Event{
		TS:      int64(r.TS),
		Dur:     int64(r.Dur),
		PID:     r.PID,
		TID:     r.TID,
		Conn:    conn,
		Dir:     opDir(op),
		Op:      op,
		Source:  trace.SourceEBPF,
		Payload: r.Payload,
	}
	if r.Ret < 0 {
		if r.Ret >= -4095 {
			e.Errno = uint32(-r.Ret)
		} else {
			e.Errno = 0xffffffff
		}
	} else {
		e.Bytes = r.Ret
	}
}

// familyOf maps a socket's address family, protocol and type to a trace family.
func familyOf(family, protocol, typ uint16) trace.Family {
	switch family {
	case afUnix:
		return trace.FamilyUnix
	case afNetlink:
		return trace.FamilyNetlink
	case afInet, afInet6:
		switch {
		case protocol == ipprotoTCP:
			return trace.FamilyTCP
		case protocol == ipprotoUDP:
			return trace.FamilyUDP
		case protocol == 0 && typ == sockStream:
			return trace.FamilyTCP
		case protocol == 0 && typ == sockDgram:
			return trace.FamilyUDP
		}
	}
	return trace.FamilyUnknown
}

// unixPath renders a unix socket path: abstract names start with '@'; unnamed sockets are "".
func unixPath(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if p[0] == 0 {
		return "@" + trimNul(p[1:])
	}
	return trimNul(p)
}

func trimNul(p []byte) string {
	for i, c := range p {
		if c == 0 {
			return string(p[:i])
		}
	}
	return string(p)
}

// endpoint renders an address and port: "127.0.0.1:5556", "[::1]:5556".
func endpoint(family uint16, addr [16]byte, port uint16) string {
	var a netip.Addr
	switch family {
	case afInet:
		a = netip.AddrFrom4([4]byte{addr[0], addr[1], addr[2], addr[3]})
	case afInet6:
		a = netip.AddrFrom16(addr).Unmap()
	default:
		return ""
	}
	return netip.AddrPortFrom(a, port).String()
}

// toConnection converts a raw connection record into a trace connection with id.
func toConnection(r *rawConn, id uint64, c *trace.Connection) {
	*c = trace.Connection{
		ID:        id,
		Family:    familyOf(r.Family, r.Protocol, r.Type),
		PID:       r.PID,
		FirstSeen: int64(r.TS),
		LastSeen:  int64(r.TS),
	}
	if r.Family == afUnix {
		c.Local = unixPath(r.LPath)
		c.Remote = unixPath(r.RPath)
		return
	}
	c.Local = endpoint(r.Family, r.LAddr, r.LPort)
	c.Remote = endpoint(r.Family, r.RAddr, r.RPort)
}

// rawUEvent is struct uevent of bpf/uprobe.bpf.c, decoded.
type rawUEvent struct {
	Op      uint8
	PID     uint32
	TID     uint32
	Spec    uint32 // the attach cookie
	TS      uint64 // CLOCK_MONOTONIC ns at entry
	Dur     uint64 // ns
	Cookie  uint64 // socket cookie of a TLS call, 0 when unknown
	Key     uint64 // the key argument's value
	Len     int64  // bytes of the message
	Payload []byte // aliases the record
}

// decodeUEvent decodes a uprobe record. The payload aliases b.
func decodeUEvent(b []byte, e *rawUEvent) error {
	if len(b) < uEventSize {
		return fmt.Errorf("decode uprobe event: %w (%d bytes)", errShort, len(b))
	}
	le := binary.LittleEndian
	if b[0] != kindUEvent {
		return fmt.Errorf("decode uprobe event: kind %d", b[0])
	}
	e.Op = b[1]
	plen := int(le.Uint16(b[2:]))
	e.PID = le.Uint32(b[4:])
	e.TID = le.Uint32(b[8:])
	e.Spec = le.Uint32(b[12:])
	e.TS = le.Uint64(b[16:])
	e.Dur = le.Uint64(b[24:])
	e.Cookie = le.Uint64(b[32:])
	e.Key = le.Uint64(b[40:])
	e.Len = int64(le.Uint64(b[48:]))
	if e.Op < uopTLSWrite || e.Op > uopRecv {
		return fmt.Errorf("decode uprobe event: op %d", e.Op)
	}
	if e.Len < 0 {
		return fmt.Errorf("decode uprobe event: length %d", e.Len)
	}
	if plen > trace.MaxPayload || plen > len(b)-uEventSize || int64(plen) > e.Len {
		return fmt.Errorf("decode uprobe event: payload length %d with %d bytes left", plen, len(b)-uEventSize)
	}
	e.Payload = b[uEventSize : uEventSize+plen]
	return nil
}

// toUEvent converts a raw uprobe event into a trace event for connection id conn. The payload
// aliases r.
func toUEvent(r *rawUEvent, conn uint64, e *trace.Event) {
	op, dir := trace.OpUprobeSend, trace.DirSend
	switch r.Op {
	case uopTLSWrite:
		op = trace.OpTLSWrite
	case uopTLSRead:
		op, dir = trace.OpTLSRead, trace.DirRecv
	case uopRecv:
		op, dir = trace.OpUprobeRecv, trace.DirRecv
	}
	*e = trace.Event{
		TS:      int64(r.TS),
		Dur:     int64(r.Dur),
		PID:     r.PID,
		TID:     r.TID,
		Conn:    conn,
		Dir:     dir,
		Op:      op,
		Source:  trace.SourceEBPF,
		Bytes:   r.Len,
		Payload: r.Payload,
	}
}
