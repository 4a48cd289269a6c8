package analyzers

import (
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// rawPair is an exchange inferred from bursts, kept until the trace's end says whether its
// connection's traffic allows the inference.
type rawPair struct {
	key                              uint64 // the connection (decoder.conns key)
	pid                              uint32
	dir                              trace.Dir // the reply's direction
	reqTS, reqEnd, ts, end, firstEnd int64
}

// rawExchanges counts the exchanges inferred on the trace's connections of unknown protocol,
// except on those whose two directions overlapped, and says what was inferred and what not.
func (a *analyzer) rawExchanges(i int, d *protocol.Decoder) {
	conns, unsafe, _, unsafeIDs := d.RawStats()
	if conns == 0 {
		return
	}
	name := a.s.Traces[i]
	// Netlink sockets talk with the kernel (glibc's getaddrinfo asks it for the addresses): no
	// network, so no round trips; their bytes stay in the totals.
	if nl := uint64(len(a.netlink)); nl > 0 {
		conns -= min(nl, conns)
		what := "netlink sockets"
		if nl == 1 {
			what = "netlink socket"
		}
		a.warnf("%s: %d %s (messages with the kernel, such as getaddrinfo's address query, not over a network): their calls and bytes count in the totals, and give no round trips", name, nl, what)
	}
	var counted uint64
	for _, rp := range a.rawPairs {
		if unsafeIDs[rp.key] || a.netlink[rp.key] {
			continue
		}
		p := a.proc(rp.pid)
		k := cmdKey{proto: "raw", name: "(raw)", dir: rp.dir, reply: true}
		ca := a.cmds[k]
		if rp.dir == trace.DirRecv {
			a.roundTrip(p, ca, rp.reqTS, rp.end)
			if rp.firstEnd > rp.reqTS {
				a.firstByte.Add(rp.firstEnd - rp.reqTS)
			}
		} else {
			a.served(p, ca, rp.reqEnd, rp.reqTS, rp.ts, rp.end)
		}
		counted++
	}
	if conns == 0 {
		return
	}
	a.warnf("%s: %d connections of unknown protocol (raw): their bytes are not decoded; each burst of calls in one direction is one message, and a burst from the side that spoke first followed by a burst back is one exchange (%d inferred); run with --protocol or a protocol spec for commands",
		name, conns, counted)
	if unsafe > 0 {
		a.warnf("%s: %d of the connections of unknown protocol carried calls in both directions at once (full-duplex or pipelined): request/reply exchanges cannot be inferred there, so they give no round trips", name, unsafe)
	}
}
