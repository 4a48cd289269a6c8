package protocol

import (
	"bytes"

	"github.com/perflab/perflab/trace"
)

// maxLineKept is how many bytes of a text line a text stream keeps: enough for a request line,
// a status line or a header; the rest of a longer line is counted but not kept.
const maxLineKept = 512

// maxLine is the longest line a text stream believes, in bytes (HTTP servers refuse header
// lines much shorter); a longer one means the stream is no text of the protocol.
const maxLine = 64 << 10

// textProto is the grammar of one direction of a text protocol (HTTP/1.1, a line protocol).
type textProto interface {
	// starts reports whether a call whose captured head is p begins a message: where a stream
	// that lost its way picks up again.
	starts(p []byte) bool
	// line takes the next complete line of the message in progress, without its terminator.
	// It names the message, asks for a body (st.skip), and says when the message is complete
	// (st.complete).
	line(st *textStream, l []byte)
	// bodyDone is called when the body asked for by line has been skipped.
	bodyDone(st *textStream)
	// replies reports whether this direction carries replies (as far as is known).
	replies() bool
	// reset makes the grammar expect the first line of a message.
	reset()
}

// textStream rebuilds the messages of one direction of a text protocol from the calls that
// moved its bytes. Lines must be seen: they are read from each call's captured head. Bodies of
// a known length are counted off, seen or not. When a line lies past the captured head the
// stream goes blind: the message in progress is taken to end where a later call starts a new
// message (the calls are aligned with the messages, as they are unless requests are
// pipelined), and the blind spells are counted.
type textStream struct {
	c     *connDecoder
	proto textProto
	dir   trace.Dir

	line    *[maxLineKept]byte // made on the first byte of a line: a stream that never sees one (no payload heads) costs no buffer
	lineLen int                // bytes of the current line so far (may exceed maxLineKept)

	open  bool  // a message is in progress
	skip  int64 // body bytes still to count off
	toEOF bool  // the body runs until the connection ends

	first bool // the message's first line was read
	blind bool // lost the line boundaries: messages are delimited by calls
	lost  bool // lost without an open message: waiting for a call that starts one

	// the message in progress
	ts, end    int64
	size       int64
	calls      int
	lastSeq    uint64
	name       string
	digest     uint64 // a request's Message.Digest: of its first line
	status     int
	isReply    bool
	wantsReply bool
	quiet      bool // a request answered only when the answer says something (LineCommand.QuietFlag)
	noPair     bool // an interim reply (HTTP 1xx): answers nothing yet

	complete  bool // set by the grammar: the message ends here
	moreAfter bool // set by the grammar: the message goes on after the body being counted off

	blindSpells uint64 // times the stream went blind
	rejected    uint64 // messages whose first line was none of the protocol's
	explained   int64  // bytes of messages decoded
}

// call feeds one call of the stream: ev moved n bytes, head is its captured head.
func (st *textStream) call(ev *trace.Event, seq uint64) {
	n := ev.Bytes
	head := ev.Payload
	if int64(len(head)) > n {
		head = head[:n]
	}
	end := ev.TS + ev.Dur
	if (st.blind || st.lost) && !st.resume(head, n, end, seq) {
		return
	}
	var pos int64
	for pos < n {
		if !st.open {
			st.begin(ev.TS)
		}
		st.touch(seq)
		st.end = end
		switch {
		case st.toEOF:
			st.take(n - pos)
			pos = n
		case st.skip > 0:
			pos += st.skipBody(n - pos)
		case pos >= int64(len(head)): // a line past the captured head
			st.pastHead(n - pos)
			return
		default:
			k, stop := st.lineStep(head[pos:], n-pos)
			pos += k
			if stop {
				return
			}
		}
	}
}

// resume decides, on a blind or lost stream, whether the call (head, n bytes, ending at end)
// starts a message: then the message in progress ends and the call is decoded (true); else
// the call belongs to the message in progress, if any (false).
func (st *textStream) resume(head []byte, n, end int64, seq uint64) bool {
	if !st.proto.starts(head) {
		if st.open {
			st.take(n)
			st.end = end
			st.touch(seq)
		}
		return false
	}
	if st.open {
		st.finish()
	}
	st.blind, st.lost = false, false
	st.resetLine()
	st.proto.reset()
	return true
}

// take counts k bytes into the message in progress, as decoded.
func (st *textStream) take(k int64) {
	st.size += k
	st.explained += k
}

// skipBody takes up to left bytes of the body being skipped, and returns how many; the body's
// end may complete the message.
func (st *textStream) skipBody(left int64) int64 {
	k := min(st.skip, left)
	st.take(k)
	st.skip -= k
	if st.skip == 0 {
		st.proto.bodyDone(st)
		if st.complete {
			st.finish()
		}
	}
	return k
}

// pastHead handles a line that lies past the captured head, rest bytes of the call: the stream
// goes blind inside a message (the rest is the message's), or rejects a message it cannot name.
func (st *textStream) pastHead(rest int64) {
	st.blindSpells++
	if !st.first { // not even the message's first line: nothing to name it by
		st.reject()
		return
	}
	st.blind = true
	st.take(rest)
}

// lineStep decodes the next (part of a) line of the call from rest, the captured bytes left
// (left bytes of the call left in all), and returns the bytes taken and whether the call is
// done with.
func (st *textStream) lineStep(rest []byte, left int64) (int64, bool) {
	i := bytes.IndexByte(rest, '\n')
	take := len(rest)
	if i >= 0 {
		take = i + 1
	}
	st.addLine(rest[:take])
	st.take(int64(take))
	if !st.first && (i >= 0 || st.lineLen > maxLineWord) && !st.proto.starts(st.lineKept()) {
		st.reject() // the message does not start like one of the protocol's
		return int64(take), true
	}
	if st.lineLen > maxLine {
		st.pastHead(left - int64(take))
		return int64(take), true
	}
	if i >= 0 {
		l := st.lineKept()
		l = bytes.TrimSuffix(bytes.TrimSuffix(l, []byte("\n")), []byte("\r"))
		if !st.first && !st.isReply {
			st.digest = digestOf(l)
		}
		st.proto.line(st, l)
		st.first = st.open
		st.resetLine()
		if st.lost {
			return int64(take), true
		}
		if st.blind { // the grammar lost the framing: the rest of the call is the message's
			st.take(left - int64(take))
			return int64(take), true
		}
		if st.complete {
			st.finish()
		}
	}
	return int64(take), false
}

// reject drops the message in progress, whose first line is none of the protocol's: its bytes
// are not explained, and the stream waits for a call that starts a message.
func (st *textStream) reject() {
	st.explained -= st.size
	st.open, st.complete, st.blind, st.lost, st.first = false, false, false, true, false
	st.resetLine()
	st.rejected++
}

func (st *textStream) addLine(b []byte) {
	if st.lineLen < maxLineKept && len(b) > 0 {
		if st.line == nil {
			st.line = new([maxLineKept]byte)
		}
		copy(st.line[st.lineLen:], b)
	}
	st.lineLen += len(b)
}

// lineKept returns the bytes kept of the current line.
func (st *textStream) lineKept() []byte {
	if st.line == nil {
		return nil
	}
	return st.line[:min(st.lineLen, maxLineKept)]
}

func (st *textStream) resetLine() { st.lineLen = 0 }

func (st *textStream) begin(ts int64) {
	st.open = true
	st.ts, st.end, st.size, st.calls, st.lastSeq = ts, ts, 0, 0, 0
	st.name, st.status, st.isReply, st.wantsReply, st.quiet, st.noPair, st.digest = "", 0, st.proto.replies(), false, false, false, 0
	st.skip, st.toEOF, st.complete, st.moreAfter, st.first = 0, false, false, false, false
}

// touch counts the call seq as one that carried part of the message.
func (st *textStream) touch(seq uint64) {
	if st.lastSeq != seq {
		st.calls++
		st.lastSeq = seq
	}
}

// finish delivers the message in progress: a request waits for its reply, a reply is paired
// with the oldest request waiting (replies come in order on HTTP/1.1 and line protocols).
func (st *textStream) finish() {
	st.open, st.complete = false, false
	c := st.c
	ev := trace.Event{Conn: c.id, PID: c.pid, Dir: st.dir, TS: st.ts, Dur: st.end - st.ts, Source: trace.SourceEBPF}
	if c.ev != nil {
		ev.TID, ev.Source = c.ev.TID, c.ev.Source
	}
	m := c.d.msg(c, &ev)
	m.Size, m.Calls, m.Status = st.size, st.calls, st.status
	m.LostSync = st.blind
	if !st.isReply {
		m.Name = st.name
		m.WantsReply = st.wantsReply
		h := hintNo
		switch {
		case st.wantsReply:
			h = hintYes
			m.Digest = st.digest
		case st.quiet:
			h = hintMaybe
		}
		c.pairs.add(pendingReq{ts: m.TS, end: m.End, name: m.Name, tid: m.TID}, h)
	} else {
		m.IsReply = true
		if st.noPair {
			m.Name = c.peekName()
			if o := c.text[3-st.dir]; m.Name == "" && o != nil && o.open && !o.isReply {
				m.Name = o.name // a request still sending its body (HTTP's Expect: 100-continue)
			}
		} else if q := c.lineAnswer(st.name); q != nil {
			m.Name, m.ReqTS, m.ReqEnd, m.RTT, m.Answered = q.name, q.ts, q.end, m.End-q.ts, 1
		} else {
			m.Name = st.name
		}
	}
	c.d.deliver(m)
}

// flush ends the stream: a body that runs to the end of the connection completes; any other
// message in progress comes out truncated.
func (st *textStream) flush() {
	if !st.open || st.size == 0 {
		st.open = false
		return
	}
	if st.toEOF || st.blind {
		st.finish()
		return
	}
	c := st.c
	ev := trace.Event{Conn: c.id, PID: c.pid, Dir: st.dir, TS: st.ts, Dur: st.end - st.ts, Source: trace.SourceEBPF}
	m := c.d.msg(c, &ev)
	m.Size, m.Calls, m.Truncated, m.Name, m.IsReply = st.size, st.calls, true, st.name, st.isReply
	st.open = false
	c.d.deliver(m)
}

// lineAnswer pairs a reply whose first word is word with the request it answers, or returns
// nil. Replies come in order: the oldest request waiting that the reply may answer (for a
// line spec, by its answers); the quiet requests before it got no reply.
func (c *connDecoder) lineAnswer(word string) *pendingReq {
	ls := c.spec.Line
	if ls == nil || !ls.constrained && !ls.quiet {
		return c.pairs.answer(0)
	}
	return c.pairs.answerInOrder(func(q *pendingReq) bool { return !ls.constrained || ls.answers(word, q.name) })
}

// peekName returns the name of the request the next reply will answer (the oldest awaiting
// one), or "".
func (c *connDecoder) peekName() string {
	for i := range c.pairs.q {
		if q := &c.pairs.q[i]; !q.done && q.hint != hintNo {
			return q.name
		}
	}
	return ""
}

// textCall decodes one call of a text protocol connection (kinds http and line).
func (c *connDecoder) textCall(ev *trace.Event) {
	st := c.text[ev.Dir]
	if st == nil {
		st = &textStream{c: c, dir: ev.Dir}
		switch c.spec.Kind {
		case "http":
			st.proto = newHTTPProto(c, ev.Payload)
		default:
			st.proto = newLineProto(c.spec, ev.Dir == c.reqDir)
		}
		c.text[ev.Dir] = st
	}
	st.call(ev, c.seq)
}
