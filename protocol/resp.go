package protocol

import (
	"bytes"
	"strings"

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
	blocks  bool   // a request's Message.Blocks
	atLeast uint64 // values not seen: at least one per call whose head ended before its bytes did
	maybe   uint64 // calls whose head ended inside a value that was not their first: more may follow it
	count   uint64 // messages delivered

	// Pub/sub (replies' direction): what the value in progress looks like, and its kind
	// ("message", "subscribe"...); pushes counts the pushes delivered; pushesAtLeast and
	// pushesMaybe are atLeast and maybe for the calls of a subscribed connection that waited
	// for no reply (the values not seen are pushes).
	shape                      pushShape
	typed                      bool // the value is a RESP3 push ('>')
	kind                       string
	pushes                     uint64
	pushesAtLeast, pushesMaybe uint64
	// pastBytes sums, over the calls counted in atLeast and maybe, the bytes past what was seen
	// of them: the most the values not counted can take
	pastBytes uint64
	// subscribed (requests' direction): the client sent SUBSCRIBE, PSUBSCRIBE or SSUBSCRIBE
	// and has not been told it left the last channel; monitor: it sent MONITOR, after which the
	// server streams every command it runs.
	subscribed, monitor bool
}

// pushShape is what a value in a RESP connection's replies looks like, as far as pub/sub goes.
type pushShape uint8

const (
	shapeReply     pushShape = iota // anything else
	shapeMessage                    // [message|pmessage|smessage, ...]: a published message
	shapeSubscribe                  // [subscribe|unsubscribe|..., channel, count]: a confirmation
	shapeLastUnsub                  // an unsubscribe confirmation whose count is 0
)

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
	if rq := &c.resp[c.reqDir]; !req && rq.open && rq.skip < 0 {
		c.respEndRequest(rq, st, head)
	}
	var pos int64
	if st.open && st.skip < 0 || st.lost { // delimited by calls: does this call start a value?
		if _, ok, _ := respValue(head, 0, req); !ok || len(head) == 0 || st.open && c.respGoesOn(st, req, head) {
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
			c.respUnseen(st, req, true, n-pos)
			st.lost = true
			c.unseen += n - pos
			return
		}
		v, ok, more := respValue(head[pos:], 0, req)
		if !ok {
			st.lost = true
			return
		}
		*st = respStream{open: true, ts: ev.TS, end: end, atLeast: st.atLeast, maybe: st.maybe, count: st.count, pastBytes: st.pastBytes,
			pushes: st.pushes, pushesAtLeast: st.pushesAtLeast, pushesMaybe: st.pushesMaybe, subscribed: st.subscribed, monitor: st.monitor}
		st.touch(c.seq)
		if !req && (head[pos] == '*' || head[pos] == '>') {
			var word []byte
			st.shape, st.kind, word = respPushShape(head[pos:])
			if st.typed = head[pos] == '>'; st.typed && st.shape == shapeReply { // a RESP3 push of another kind
				st.shape, st.kind = shapeMessage, "push"
				if len(word) > 0 {
					st.kind = strings.ToLower(string(word))
				}
			}
		}
		if req {
			st.name = respCommand(head[pos:])
			if subscribes(st.name) {
				st.subscribed = true
			}
			if st.name == "MONITOR" {
				st.monitor = true
			}
			seen := head[pos:]
			if !more {
				seen = seen[:min(v, int64(len(seen)))]
			}
			st.digest = digestOf(seen)
			st.blocks = blockArgument(st.name, seen)
		}
		if more { // its length lies past the head: it runs to the next call that starts a value
			st.skip = -1
			st.size = n - pos
			c.explained += n - pos
			if pos > 0 {
				c.respUnseen(st, req, false, n-int64(len(head))) // values after it in this call, if any, are not seen
			}
			return
		}
		st.skip = v
	}
}

// respEndRequest ends the request in progress rq, whose end lay past its head, when a call of
// the replies' stream st starts a value and no request is waiting but the one the reply in
// progress, if any, answers: a server answers only whole commands. Left to run to the client's
// next call, the request would miss its reply, and every later reply would answer the request
// before its own.
func (c *connDecoder) respEndRequest(rq, st *respStream, head []byte) {
	if st.open && st.skip >= 0 || len(head) == 0 {
		return // the call goes on with a reply of known length, or shows nothing
	}
	if _, ok, _ := respValue(head, 0, false); !ok {
		return
	}
	var open uint64
	if st.open {
		open = 1
	}
	if c.pairs.waiting() <= open {
		c.respFinish(rq, c.reqDir)
	}
}

// respGoesOn reports whether a call that starts like a value, in the direction of stream st
// whose value in progress runs past what was seen, goes on with that value instead: a reply
// whose request is the only one waiting (nothing else has been asked, so nothing else can be
// answered), on a connection that gets no pushes. A big reply's later calls (a COMMAND DOCS's
// 170 KB) often start with bytes that parse as a value; taken for replies, they would answer
// the requests after it.
func (c *connDecoder) respGoesOn(st *respStream, req bool, head []byte) bool {
	if req || head[0] == '>' {
		return false
	}
	if rq := &c.resp[c.reqDir]; rq.subscribed || rq.monitor {
		return false
	}
	return c.pairs.waiting() <= 1
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
		m.Name, m.Digest, m.Blocks = st.name, st.digest, st.blocks
		m.WantsReply = true
		c.push(pendingReq{ts: m.TS, end: m.End, name: m.Name, blocks: st.blocks})
	} else {
		m.IsReply = true
		if c.respPush(st) {
			m.Push, m.Name = true, st.kind
			st.pushes++
			c.d.deliver(m)
			return
		}
		if q, ok := c.pop(); ok {
			m.Name, m.ReqTS, m.ReqEnd, m.RTT, m.Blocks = q.name, q.ts, q.end, m.End-q.ts, q.blocks
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
	order := [3]trace.Dir{trace.DirNone, trace.DirSend, trace.DirRecv}
	if s, r := &c.resp[trace.DirSend], &c.resp[trace.DirRecv]; recvFirst(s.open, s.ts, r.open, r.ts) {
		order[1], order[2] = trace.DirRecv, trace.DirSend
	}
	for _, dir := range order {
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

// respSetup takes the direction of the connection's first value: the requests', unless the
// value is a published message, which only a server sends (the trace began after the client
// subscribed).
func (c *connDecoder) respSetup(ev *trace.Event) {
	head := ev.Payload
	if int64(len(head)) > ev.Bytes {
		head = head[:ev.Bytes]
	}
	if len(head) > 0 && (head[0] == '*' || head[0] == '>') {
		if shape, _, _ := respPushShape(head); shape == shapeMessage || head[0] == '>' {
			c.reqDir = trace.DirSend
			if ev.Dir == trace.DirSend {
				c.reqDir = trace.DirRecv
			}
			c.resp = new([3]respStream)
			c.resp[c.reqDir].subscribed = shape == shapeMessage
		}
	}
}

// respUnseen counts a call of direction st whose head ended before its values did: sure, when
// bytes of the call lay past the end of a value (at least one more value was not seen), or
// not, when the head ended inside a value whose length it did not show (values may follow it
// in the call unseen, or none). In the replies of a subscribed connection that waits for no
// reply, the values not seen are pushes, which the round trips do not miss.
func (c *connDecoder) respUnseen(st *respStream, req, sure bool, bytes int64) {
	rq := &c.resp[c.reqDir]
	push := !req && (rq.subscribed || rq.monitor) && c.pairs.inOrder() == nil
	switch {
	case push && sure:
		st.pushesAtLeast++
	case push:
		st.pushesMaybe++
	case sure:
		st.atLeast++
	default:
		st.maybe++
	}
	if !push {
		st.pastBytes += uint64(max(bytes, 0))
	}
}

// respPush reports whether the reply value st has just read is a push rather than the reply
// to the oldest request waiting. A published message is one on a subscribed connection, or
// when no request waits (the trace began after the SUBSCRIBE). A subscription confirmation
// answers a waiting SUBSCRIBE-family request (the first one of its channels); the others,
// one per further channel, are pushes. RESP3 pushes (type '>') are pushes but as
// confirmations. A subscribed connection that waits for no reply is sent nothing but pushes,
// and a connection that sent MONITOR is then sent a line per command the server runs.
// A push that says the last channel was left ends the subscribed state.
func (c *connDecoder) respPush(st *respStream) bool {
	rq := &c.resp[c.reqDir]
	if st.shape == shapeReply && !rq.subscribed && !rq.monitor {
		return false // a reply, as nearly every value is: the queue is not looked at
	}
	next := c.pairs.inOrder()
	switch st.shape {
	case shapeMessage:
		return st.typed || rq.subscribed || next == nil
	case shapeSubscribe, shapeLastUnsub:
		if st.shape == shapeLastUnsub {
			rq.subscribed = false
		}
		if next != nil && subscriptionCommand(next.name) {
			return false
		}
		return st.typed || rq.subscribed || next == nil || st.shape == shapeLastUnsub
	}
	// a value whose kind lay past the head: a subscribed connection waiting for no reply is
	// sent nothing else; a monitoring one is sent the commands the server runs
	if rq.monitor && next == nil {
		st.kind = "monitor"
		return true
	}
	return rq.subscribed && next == nil
}

// subscribes reports whether the command named enters the pub/sub state.
func subscribes(name string) bool {
	return name == "SUBSCRIBE" || name == "PSUBSCRIBE" || name == "SSUBSCRIBE"
}

// subscriptionCommand reports whether the command named is answered by subscription
// confirmations, one per channel.
func subscriptionCommand(name string) bool {
	switch name {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE":
		return true
	}
	return false
}

// pushKinds are the first elements of the arrays a Redis server pushes, with their shapes and
// element counts.
var pushKinds = [...]struct {
	kind  string
	shape pushShape
	n     int64
}{
	{"message", shapeMessage, 3}, {"smessage", shapeMessage, 3}, {"pmessage", shapeMessage, 4},
	{"subscribe", shapeSubscribe, 3}, {"psubscribe", shapeSubscribe, 3}, {"ssubscribe", shapeSubscribe, 3},
	{"unsubscribe", shapeSubscribe, 3}, {"punsubscribe", shapeSubscribe, 3}, {"sunsubscribe", shapeSubscribe, 3},
}

// respPushShape tells, from the head p of an array or RESP3 push value, whether it is shaped as
// a published message or a subscription confirmation, and its kind (pushKinds'); word is its
// first element when that is a short string, whatever the shape. It allocates nothing: it is
// asked of every array a client receives.
func respPushShape(p []byte) (shape pushShape, kind string, word []byte) {
	i := bytes.Index(p, []byte("\r\n"))
	if i < 0 {
		return shapeReply, "", nil
	}
	k, ok := respInt(p[1:i])
	if !ok || k < 1 {
		return shapeReply, "", nil
	}
	rest := p[i+2:]
	word, n := respWord(rest)
	if n == 0 {
		return shapeReply, "", nil
	}
	for _, e := range pushKinds {
		if k != e.n || !bytesEqualFold(word, e.kind) {
			continue
		}
		if strings.Contains(e.kind, "unsub") { // its count, the third element, may be 0
			if ch, ok, more := respValue(rest[n:], 1, false); ok && !more && n+int(ch) < len(rest) && bytes.HasPrefix(rest[n+int(ch):], []byte(":0\r\n")) {
				return shapeLastUnsub, e.kind, word
			}
		}
		return e.shape, e.kind, word
	}
	return shapeReply, "", word
}

// blockArgument reports whether the request p (its captured head) of the command named
// (upper case) is an XREAD or XREADGROUP with a BLOCK argument before STREAMS, among the
// arguments captured: it waits on the server until an entry comes or its timeout ends. A
// BLOCK past the head is not seen.
func blockArgument(name string, p []byte) bool {
	if name != "XREAD" && name != "XREADGROUP" || len(p) == 0 || p[0] != '*' {
		return false
	}
	i := bytes.Index(p, []byte("\r\n"))
	if i < 0 {
		return false
	}
	k, ok := respInt(p[1:i])
	rest := p[i+2:]
	for ; ok && k > 0; k-- {
		v, whole, more := respValue(rest, 1, false)
		if !whole || more || v > int64(len(rest)) {
			return false
		}
		if word, n := respWord(rest); n > 0 {
			switch {
			case bytesEqualFold(word, "block"):
				return true
			case bytesEqualFold(word, "streams"):
				return false
			}
		}
		rest = rest[v:]
	}
	return false
}

// respWord returns the simple or bulk string at the start of p and the bytes it takes; n is 0
// when p starts with neither, or it lies past p's end, or it is longer than a pub/sub kind.
func respWord(p []byte) (word []byte, n int) {
	i := bytes.Index(p, []byte("\r\n"))
	if i < 1 {
		return nil, 0
	}
	switch p[0] {
	case '+':
		return p[1:i], i + 2
	case '$':
		l, ok := respInt(p[1:i])
		if !ok || l < 1 || l > 12 || i+2+int(l)+2 > len(p) {
			return nil, 0
		}
		return p[i+2 : i+2+int(l)], i + 2 + int(l) + 2
	}
	return nil, 0
}

// bytesEqualFold reports whether b is s, a lower-case word, ignoring ASCII case.
func bytesEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}
