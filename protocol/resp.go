package protocol

import (
	"bytes"

	"github.com/perflab/perflab/trace"
)

// respStream is one direction of a Redis RESP connection. Messages are measured from the
// captured heads: a value whose length is known (its headers within the head) is counted off
// to its last byte, across calls, and several values in one call (pipelining) are several
// messages. A value whose headers lie past the head ends where a later call starts a new value
// (the calls are aligned with the messages unless requests are pipelined); the values that may
// follow it in the same call are not seen, and are counted as "at least" with a warning that
// names the connection.
type respStream struct {
	open    bool  // a message is in progress
	skip    int64 // its bytes still to come; -1: unknown, it ends where a call starts a value
	lost    bool  // waiting for a call that starts a value
	ts, end int64
	size    int64
	calls   int
	lastSeq uint64
	name    string
	digest  uint64 // a request's Message.Digest: of its bytes in the head
	atLeast uint64 // values not seen: at least one per call whose head ended before its bytes did
	count   uint64 // messages delivered
}

// maxRESPDepth bounds the nesting of aggregates that is followed.
const maxRESPDepth = 8

// respValue returns the length in bytes of the RESP value at the start of p: ok is false when p
// does not start a RESP value, more is true when its length cannot be told from p (a header
// lies past p's end). inline accepts an inline command (a request).
func respValue(p []byte, depth int, inline bool) (n int64, ok, more bool) {
	if len(p) == 0 {
		return 0, true, true
	}
	i := bytes.Index(p, []byte("\r\n"))
	if i < 0 { // the header line goes on past p: believed only if it looks like one
		switch {
		case p[0] == '+' || p[0] == '-':
			for _, ch := range p[1:] {
				if ch < ' ' && ch != '\t' && ch != '\r' || ch == 0x7f {
					return 0, false, false
				}
			}
			return 0, true, true
		case bytes.IndexByte([]byte("$!=*%~>|:_#,("), p[0]) >= 0:
			if _, ok := respInt(bytes.TrimSuffix(p[1:], []byte("\r"))); ok || len(p) == 1 {
				return 0, true, true
			}
		}
		return 0, false, false
	}
	line := int64(i + 2)
	switch p[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return line, true, false
	case '$', '!', '=':
		l, ok := respInt(p[1:i])
		if !ok {
			return 0, false, false
		}
		if l < 0 {
			return line, true, false
		}
		return line + l + 2, true, false
	case '*', '%', '~', '>', '|':
		k, ok := respInt(p[1:i])
		if !ok || depth >= maxRESPDepth {
			return 0, ok, ok
		}
		if k < 0 {
			return line, true, false
		}
		if p[0] == '%' || p[0] == '|' {
			k *= 2
		}
		off := line
		for e := int64(0); e < k; e++ {
			if off >= int64(len(p)) {
				return 0, true, true
			}
			sub, ok, more := respValue(p[off:], depth+1, false)
			if !ok || more {
				return 0, ok, more
			}
			off += sub
		}
		return off, true, false
	}
	if inline && depth == 0 && isInline(p) {
		return line, true, false
	}
	return 0, false, false
}

// respInt parses a RESP length: an optional minus and at most 12 digits.
func respInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	if neg {
		return -n, true
	}
	return n, true
}

// respCall decodes one call of a RESP connection. Every request gets a reply, in order.
func (c *connDecoder) respCall(ev *trace.Event) {
	if c.resp == nil {
		c.resp = new([3]respStream)
	}
	st := &c.resp[ev.Dir]
	head := ev.Payload
	if int64(len(head)) > ev.Bytes {
		head = head[:ev.Bytes]
	}
	n, end := ev.Bytes, ev.TS+ev.Dur
	req := ev.Dir == c.reqDir
	var pos int64
	if st.open && st.skip < 0 || st.lost { // delimited by calls: does this call start a value?
		if _, ok, _ := respValue(head, 0, req); !ok || len(head) == 0 {
			if st.open {
				st.size += n
				c.explained += n
				st.end = end
				st.touch(c.seq)
			}
			return
		}
		if st.open {
			c.respFinish(st, ev.Dir)
		}
		st.lost = false
	}
	for pos < n {
		if st.open && st.skip > 0 {
			k := min(st.skip, n-pos)
			pos += k
			st.skip -= k
			st.size += k
			c.explained += k
			st.end = end
			st.touch(c.seq)
			if st.skip == 0 {
				c.respFinish(st, ev.Dir)
			}
			continue
		}
		if pos >= int64(len(head)) { // more bytes, unseen: values we cannot count
			st.atLeast++
			st.lost = true
			c.unseen += n - pos
			return
		}
		v, ok, more := respValue(head[pos:], 0, req)
		if !ok {
			st.lost = true
			return
		}
		*st = respStream{open: true, ts: ev.TS, end: end, atLeast: st.atLeast, count: st.count}
		st.touch(c.seq)
		if req {
			st.name = respCommand(head[pos:])
			seen := head[pos:]
			if !more {
				seen = seen[:min(v, int64(len(seen)))]
			}
			st.digest = digestOf(seen)
		}
		if more { // its length lies past the head: it runs to the next call that starts a value
			st.skip = -1
			st.size = n - pos
			c.explained += n - pos
			if pos > 0 {
				st.atLeast++ // values after it in this call are not seen
			}
			return
		}
		st.skip = v
	}
}

func (st *respStream) touch(seq uint64) {
	if st.lastSeq != seq {
		st.calls++
		st.lastSeq = seq
	}
}

// respFinish delivers the message in progress.
func (c *connDecoder) respFinish(st *respStream, dir trace.Dir) {
	st.open = false
	st.count++
	ev := trace.Event{Conn: c.id, PID: c.pid, Dir: dir, TS: st.ts, Dur: st.end - st.ts, Source: trace.SourceEBPF}
	if c.ev != nil {
		ev.TID, ev.Source = c.ev.TID, c.ev.Source
	}
	m := c.d.msg(c, &ev)
	m.Size, m.Calls = st.size, st.calls
	if dir == c.reqDir {
		m.Name, m.Digest = st.name, st.digest
		m.WantsReply = true
		c.push(pendingReq{ts: m.TS, end: m.End, name: m.Name})
	} else {
		m.IsReply = true
		if q, ok := c.pop(); ok {
			m.Name, m.ReqTS, m.ReqEnd, m.RTT = q.name, q.ts, q.end, m.End-q.ts
		}
	}
	c.d.deliver(m)
}

// respFlush ends the streams: a message delimited by calls completes; one cut short is
// delivered truncated.
func (c *connDecoder) respFlush() {
	if c.resp == nil {
		return
	}
	for dir := range c.resp {
		st := &c.resp[dir]
		if !st.open {
			continue
		}
		if st.skip > 0 {
			ev := trace.Event{Conn: c.id, PID: c.pid, Dir: trace.Dir(dir), TS: st.ts, Dur: st.end - st.ts, Source: trace.SourceEBPF}
			m := c.d.msg(c, &ev)
			m.Size, m.Calls, m.Truncated, m.Name = st.size, st.calls, true, st.name
			m.IsReply = trace.Dir(dir) != c.reqDir
			st.open = false
			c.d.deliver(m)
			continue
		}
		c.respFinish(st, trace.Dir(dir))
	}
}
