package merge

import (
	"net"
	"sort"

	"github.com/perflab/perflab/trace"
)

// ConnPair is one connection seen from both ends: A in one input, B in another.
type ConnPair struct {
	A, B         int    // input indexes
	ConnA, ConnB uint64 // connection ids in their own inputs
	Family       trace.Family
}

// Msg is one message (or the part of one that a send and a receive share) seen from both ends:
// Send is when the sender's call began, Recv when the receiver's call ended, each in ns on its
// own host's clock. Recv − Send is then at least the one-way delay, whatever the clocks.
type Msg struct {
	Send, Recv int64
}

// NormAddr returns addr with its IP in canonical form (IPv4-mapped IPv6 as IPv4), so that
// "[::ffff:127.0.0.1]:80" and "127.0.0.1:80" compare equal.
func NormAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return addr
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), port)
}

// MatchConns returns the connections of input a that input b saw from the other end: same
// family, a's local address is b's remote and the other way round. Unix sockets and shm, whose
// ends have no distinct addresses, do not match. When several connections share the addresses
// (a port reused), they are paired in first-seen order.
func MatchConns(a, b int, fa, fb *trace.File) []ConnPair {
	type key struct {
		fam         trace.Family
		local, peer string
	}
	side := func(f *trace.File, mirror bool) map[key][]trace.Connection {
		m := map[key][]trace.Connection{}
		for _, c := range f.Connections {
			if c.Family != trace.FamilyTCP && c.Family != trace.FamilyUDP || c.Local == "" || c.Remote == "" {
				continue
			}
			k := key{c.Family, NormAddr(c.Local), NormAddr(c.Remote)}
			if mirror {
				k.local, k.peer = k.peer, k.local
			}
			m[k] = append(m[k], c)
		}
		for _, cs := range m {
			sort.SliceStable(cs, func(i, j int) bool { return cs[i].FirstSeen < cs[j].FirstSeen })
		}
		return m
	}
	ma, mb := side(fa, false), side(fb, true)
	var out []ConnPair
	for k, ca := range ma {
		cb := mb[k]
		for i := 0; i < len(ca) && i < len(cb); i++ {
			out = append(out, ConnPair{A: a, B: b, ConnA: ca[i].ID, ConnB: cb[i].ID, Family: k.fam})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConnA < out[j].ConnA })
	return out
}

// dataEvents returns the successful sends or receives of connection conn, in time order. When a
// connection has events from both the kernel probes and a tracer, only the probes' count.
func dataEvents(f *trace.File, conn uint64, dir trace.Dir) []trace.Event {
	var ebpf, other []trace.Event
	for _, e := range f.Events {
		if e.Conn != conn || e.Dir != dir || e.Errno != 0 || e.Bytes <= 0 || e.Op == trace.OpRoundTrip || e.Op == trace.OpCall {
			continue
		}
		if e.Source == trace.SourceEBPF {
			ebpf = append(ebpf, e)
		} else {
			other = append(other, e)
		}
	}
	evs := other
	if len(ebpf) > 0 {
		evs = ebpf
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].TS < evs[j].TS })
	return evs
}

// Messages returns the messages sent by one end of the connection and received by the other,
// with the sender's and the receiver's events. A stream is matched by byte offset: both ends
// count the bytes of each direction from the connection's start, so each pair of a send and a
// receive whose byte ranges overlap gives a message. Datagrams are matched by order. It also
// returns the bytes each side moved, which differ when a recording started late or lost events.
func Messages(fam trace.Family, sends, recvs []trace.Event) (msgs []Msg, sent, received int64) {
	for _, e := range sends {
		sent += e.Bytes
	}
	for _, e := range recvs {
		received += e.Bytes
	}
	if fam == trace.FamilyUDP {
		for i := 0; i < len(sends) && i < len(recvs); i++ {
			msgs = append(msgs, Msg{Send: sends[i].TS, Recv: recvs[i].TS + recvs[i].Dur})
		}
		return msgs, sent, received
	}
	var so, ro int64 // start offsets of sends[i] and recvs[j]
	for i, j := 0, 0; i < len(sends) && j < len(recvs); {
		se, re := so+sends[i].Bytes, ro+recvs[j].Bytes
		if so < re && ro < se {
			msgs = append(msgs, Msg{Send: sends[i].TS, Recv: recvs[j].TS + recvs[j].Dur})
		}
		if se <= re {
			so = se
			i++
		} else {
			ro = re
			j++
		}
		if se == re {
			ro = re
			j++
		}
	}
	return msgs, sent, received
}
