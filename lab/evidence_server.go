package lab

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/perflab/perflab/trace"
)

// callSpan is one system call that moved data: when it began and ended (ns), its thread, and
// the offset in its direction's byte stream just past its last byte.
type callSpan struct {
	from, to int64
	tid      uint32
	off      int64
}

// connCalls are one traced connection's data calls, by direction.
type connCalls struct {
	pid          uint32
	sends, recvs []callSpan
}

// span is one runnable stretch of a thread: made runnable at from, ran at to (ns); waker is the
// process that woke it (0: an interrupt, or a preemption).
type span struct {
	from, to int64
	waker    uint32
	idle     bool // woken on a CPU that was idle (not after a preemption)
}

// maxSendSkew is how long after the server's read of a request the client's send of it may be
// seen to end: the probes time a call at its end, and the server, woken on another CPU, may
// read the request before the client's system call returns (ns).
const maxSendSkew = int64(1e6)

// sideDelays are both sides' wake-up and run-queue delay of the round trips of one point.
type sideDelays struct {
	// Requests counts the requests paired with the server's read of them, ServerNs their delays:
	// the time the server thread that read each one sat runnable between its arrival and the
	// end of that read.
	Requests uint64
	ServerNs int64
	// Replies counts the replies paired with the client's read of them; ClientIdleNs and
	// ClientBusyNs are the time the client thread that read each one sat runnable between its
	// arrival and the end of that read, on a CPU that was idle (its wake-up) and behind other
	// threads.
	Replies                    uint64
	ClientIdleNs, ClientBusyNs int64
}

// pointDelays is each side's wake-up and run-queue delay from the evidence trace at path of a
// depth-1 point whose clients ran in process clientPid and whose server ran in serverPid. The
// two intervals of a round trip do not overlap (the request's, from its arrival to the server's
// read; the reply's, from its arrival to the client's read), so their sum is within its RTT.
// The probes time a call at its end, so a message arrived during its send: when the reading
// thread was woken by the sender's process after the sender had the previous message from it,
// after the thread's own previous read and before the send ended, at that wake-up; else at
// the send's end. Each server connection is paired with the client connection whose byte
// streams and times line up with its own (interleaved).
func pointDelays(path string, clientPid, serverPid uint32) (sideDelays, error) {
	var d sideDelays
	r, err := trace.Open(path)
	if err != nil {
		return d, fmt.Errorf("open evidence trace: %w", err)
	}
	defer r.Close()
	conns := map[uint64]*connCalls{}
	threads := map[uint32][]span{}
	var rec trace.Record
	for {
		if err := r.Next(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return d, fmt.Errorf("read evidence trace: %w", err)
		}
		if rec.Kind != trace.KindEvent {
			continue
		}
		e := &rec.Event
		if e.PID != clientPid && e.PID != serverPid {
			continue
		}
		switch {
		case e.Op == trace.OpRunnable:
			if e.Dur >= 0 {
				si, err := trace.DecodeSchedInfo(e.Payload)
				if err != nil {
					continue
				}
				idle := si.Flags&trace.SchedIdle != 0 && si.Flags&trace.SchedPreempted == 0
				threads[e.TID] = append(threads[e.TID], span{e.TS, e.TS + e.Dur, si.Waker, idle})
			}
		case e.Conn != 0 && e.Errno == 0 && e.Bytes > 0 && (e.Dir == trace.DirSend || e.Dir == trace.DirRecv):
			c := conns[e.Conn]
			if c == nil {
				c = &connCalls{pid: e.PID}
				conns[e.Conn] = c
			}
			s := callSpan{e.TS, e.TS + e.Dur, e.TID, e.Bytes}
			if e.Dir == trace.DirSend {
				c.sends = append(c.sends, s)
			} else {
				c.recvs = append(c.recvs, s)
			}
		}
	}
	var clients, servers []*connCalls
	reads := map[uint32][]callSpan{} // every read, by thread, sorted by end
	for _, c := range conns {
		stream(c.sends)
		stream(c.recvs)
		if c.pid == clientPid {
			clients = append(clients, c)
		} else {
			servers = append(servers, c)
		}
		for _, r := range c.recvs {
			reads[r.tid] = append(reads[r.tid], r)
		}
	}
	for _, v := range reads {
		sort.Slice(v, func(i, j int) bool { return v[i].to < v[j].to })
	}
	for _, sp := range threads {
		sort.Slice(sp, func(i, j int) bool { return sp[i].from < sp[j].from })
	}
	used := map[*connCalls]bool{}
	for _, sv := range servers {
		// Of the client connections that interleave with it, the one whose requests the server
		// read soonest after they were sent; none when a second comes within half of its gap
		// (the batch loop keeps its clients in step: better to leave it out than guess).
		var match *connCalls
		best, second := int64(-1), int64(-1)
		for _, cl := range clients {
			if used[cl] {
				continue
			}
			g, ok := interleaved(cl, sv)
			if !ok {
				continue
			}
			switch {
			case best < 0 || g < best:
				second, best, match = best, g, cl
			case second < 0 || g < second:
				second = g
			}
		}
		if match == nil || (second >= 0 && 2*best > second) {
			continue
		}
		used[match] = true
		n, idle, busy := oneWay(match, sv, threads, reads, clientPid)
		d.Requests += n
		d.ServerNs += idle + busy
		n, idle, busy = oneWay(sv, match, threads, reads, serverPid)
		d.Replies += n
		d.ClientIdleNs += idle
		d.ClientBusyNs += busy
	}
	return d, nil
}

// oneWay sums the delays of the messages connection from sent to connection to (its other end),
// sent by process senderPid: for each, the reading thread's runnable time from the message's
// arrival to the end of the read that took its last byte, on a CPU that was idle and behind
// other threads (ns); n counts the messages.
func oneWay(from, to *connCalls, threads map[uint32][]span, reads map[uint32][]callSpan, senderPid uint32) (n uint64, idle, busy int64) {
	for _, snd := range from.sends {
		read, ok := covering(to.recvs, snd.off)
		if !ok {
			continue
		}
		sp := threads[read.tid]
		arrived := min(snd.to, read.to)
		// The wake-up this message made, if the reading thread had one from the sender's
		// process after the sender had the previous message from the reader's side and after
		// the thread's own previous read (a wake-up before that one led to that read).
		lo := max(previousBefore(from.recvs, snd.to), previousBefore(reads[read.tid], read.to))
		i := sort.Search(len(sp), func(i int) bool { return sp[i].from >= lo })
		for ; i < len(sp) && sp[i].from <= arrived; i++ {
			if sp[i].waker == senderPid {
				arrived = sp[i].from
				break
			}
		}
		a, b := runnableWithin(sp, arrived, read.to)
		idle += a
		busy += b
		n++
	}
	return n, idle, busy
}

// interleaved reports whether client connection cl and server connection sv are the two ends of
// one depth-1 connection: their byte streams line up (whatever the server read, the client
// sent), and the server read each request after the client had the previous reply and at most
// maxSendSkew before the client's send of it ended. gap is the mean time from a request's send
// to the end of its read, ns.
func interleaved(cl, sv *connCalls) (gap int64, ok bool) {
	if len(cl.sends) == 0 || len(sv.recvs) == 0 {
		return 0, false
	}
	for _, r := range sv.recvs {
		s, ok := covering(cl.sends, r.off)
		if !ok || s.to > r.to+maxSendSkew || previousBefore(cl.recvs, s.to) > r.to {
			return 0, false
		}
	}
	for _, s := range cl.sends {
		r, ok := covering(sv.recvs, s.off)
		if !ok {
			continue
		}
		gap += max(0, r.to-s.to)
	}
	return gap / int64(len(cl.sends)), true
}

// previousBefore returns the end of the last call of v (sorted) that ended before t, 0 when none.
func previousBefore(v []callSpan, t int64) int64 {
	i := sort.Search(len(v), func(i int) bool { return v[i].to >= t })
	if i == 0 {
		return 0
	}
	return v[i-1].to
}

// stream sorts one direction's calls by start and sets each one's end offset in the stream.
func stream(v []callSpan) {
	sort.Slice(v, func(i, j int) bool { return v[i].from < v[j].from })
	var off int64
	for i := range v {
		off += v[i].off
		v[i].off = off
	}
}

// covering returns the call of v (by stream offset) that moved the byte just before off.
func covering(v []callSpan, off int64) (callSpan, bool) {
	i := sort.Search(len(v), func(i int) bool { return v[i].off >= off })
	if i == len(v) {
		return callSpan{}, false
	}
	return v[i], true
}

// runnableWithin sums the overlap of stretches sp (sorted by start) with [from, to], on a CPU
// that was idle and behind other threads, ns.
func runnableWithin(sp []span, from, to int64) (idle, busy int64) {
	i := sort.Search(len(sp), func(i int) bool { return sp[i].to > from })
	for ; i < len(sp) && sp[i].from < to; i++ {
		a, b := max(sp[i].from, from), min(sp[i].to, to)
		if b <= a {
			continue
		}
		if sp[i].idle {
			idle += b - a
		} else {
			busy += b - a
		}
	}
	return idle, busy
}
