package protocol

import (
	"bytes"
	"encoding/binary"

	"github.com/perflab/perflab/trace"
)

// maxPending bounds the requests awaiting a reply on one connection; older ones are dropped and
// counted, so a stream of requests whose replies are never seen cannot grow memory.
const maxPending = 1 << 14

type pendingReq struct {
	ts     int64 // start of the request's first call, ns
	end    int64 // end of its last call (its last byte), ns
	cmd    uint64
	name   string
	reqID  uint64
	tid    uint32
	hasCmd bool
	maybe  bool // not known to want a reply (its records lay past the captured head)
	blocks bool // Message.Blocks

	hint hint   // what the decoder believed (pairer)
	seq  uint64 // order on the connection (pairer)
	done bool   // answered, or taken as answered by nothing (pairer)
}

// connDecoder decodes one connection: it picks the protocol (auto), learns which direction
// carries requests (the side that speaks first), rebuilds frames, and pairs replies.
type connDecoder struct {
	d       *Decoder
	key     uint64 // in Decoder.conns (connKey)
	stamp   uint64 // auto detection: the latest data event's number while live (pass.touch), else 0
	id      uint64
	pid     uint32
	spec    *Spec
	first   *Spec      // auto detection: the protocol it was counted as before it was retired and came back
	reqDir  trace.Dir  // direction of requests, DirNone until the first data
	framers [3]*framer // by direction; nil while both are idle (releaseFramers)
	version [3]int
	seq     uint64

	pairs   pairer                // requests of decoded frames, and their replies
	byID    map[uint64]pendingReq // a tracer's requests by id
	dropped uint64                // a tracer's requests dropped from byID

	raw         *rawBurst      // the burst being gathered, for protocols without a decoder; made on the first call
	ev          *trace.Event   // the event being decoded
	tracer      bool           // frames come from an in-process tracer
	framed      bool           // the framers were made (a binary protocol)
	hot         bool           // among the Decoder's hot connections (touch)
	variantDone bool           // venus: whether the frames are venusd's or real Venus was decided
	text        [3]*textStream // text protocols (http, line): one stream per direction
	data        int64          // bytes the connection's data events moved
	explained   int64          // of them, bytes of messages decoded (binary, resp, tracer frames)
	// unseen is, of data, the bytes past a call's captured head that follow the values the head
	// showed (resp's pipelining): no decoder could frame them, since no byte of them was kept
	unseen int64

	resp *[3]respStream // resp: one stream per direction; made on the first call

	// what the released framers counted (framer.lost, lostBytes, seenBytes)
	lostSync  uint64
	lostBytes int64
	seenBytes int64
}

func (c *connDecoder) setup(ev *trace.Event) {
	c.reqDir = ev.Dir
	if c.spec == nil {
		c.spec = c.d.choice(ev)
	}
	c.d.protos[c.spec.Name] = true
	c.version = c.spec.defVer
	if c.spec.Kind == "resp" {
		c.respSetup(ev)
	}
	c.initFramers()
}

// initFramers makes the framers of a binary protocol, once the request direction is known.
func (c *connDecoder) initFramers() {
	if c.spec.Kind == "binary" && !c.framed {
		c.framed = true
		c.makeFramers()
	}
}

// replyDir is the direction opposite the requests'.
func (c *connDecoder) replyDir() trace.Dir {
	if c.reqDir == trace.DirSend {
		return trace.DirRecv
	}
	return trace.DirSend
}

// makeFramers makes fresh framers for both directions, from the trace's spares when it has any.
func (c *connDecoder) makeFramers() {
	c.framers[c.reqDir] = c.d.framer(c.spec, c.spec.Request, nil)
	c.framers[c.replyDir()] = c.d.framer(c.spec, c.spec.Reply, c.spec.VersionField)
	if n := len(c.d.spareQ); c.pairs.q == nil && n > 0 {
		c.pairs.q, c.d.spareQ = c.d.spareQ[n-1], c.d.spareQ[:n-1]
	}
}

// hotConns is how many of the connections that carried the latest calls keep their framers
// (and their capture buffers) between frames; the others give them back (releaseFramers).
const hotConns = 64

// touch notes that c carried a call: it joins the hot connections, and the one that carried a
// call the longest ago leaves them, giving back its framers when they are between frames. A
// connection in steady use then keeps its framers instead of making them again for every
// frame, while a trace of many connections holds framers only for hotConns of them and those
// in the middle of a frame.
func (c *connDecoder) touch() {
	if !c.hot {
		c.join()
	}
}

// join makes c one of the hot connections (touch).
func (c *connDecoder) join() {
	d := c.d
	if old := d.hot[d.hotPos]; old != nil {
		old.hot = false
		old.releaseFramers()
	}
	d.hot[d.hotPos] = c
	d.hotPos = (d.hotPos + 1) % hotConns
	c.hot = true
}

// releaseFramers gives the framers back to the trace's spares when neither holds part of a
// frame and both are still what makeFramers would make, keeping what they counted: a trace of
// many connections then keeps framers only for the connections in the middle of a frame. The
// next call makes them afresh, and decodes exactly as the released ones would have. Framers
// that stay give back their capture buffers when they hold nothing.
func (c *connDecoder) releaseFramers() {
	req, rep := c.framers[c.reqDir], c.framers[c.replyDir()]
	for _, f := range c.framers {
		if f != nil {
			f.drop()
		}
	}
	if req == nil || rep == nil || !req.idle() || !rep.idle() ||
		req.spec != c.spec || rep.spec != c.spec || req.hdr != c.spec.Request || rep.hdr != c.spec.Reply ||
		req.peekEnd != peekEndOf(c.spec, c.spec.Request, nil) || rep.peekEnd != peekEndOf(c.spec, c.spec.Reply, c.spec.VersionField) {
		return
	}
	for _, f := range [...]*framer{req, rep} {
		c.lostSync += f.lost
		c.lostBytes += f.lostBytes
		c.seenBytes += f.seenBytes
	}
	c.d.spare = append(c.d.spare, req, rep)
	c.framers[trace.DirSend], c.framers[trace.DirRecv] = nil, nil
	if len(c.pairs.q) == 0 && cap(c.pairs.q) > 0 { // no request waits: the queue's storage goes too
		if cap(c.pairs.q) <= maxSpareQueue {
			c.d.spareQ = append(c.d.spareQ, c.pairs.q[:0])
		}
		c.pairs.q = nil
	}
}

// maxSpareQueue is the largest request queue (in requests) kept for reuse by releaseFramers;
// larger ones are left to the collector.
const maxSpareQueue = 64

// event decodes one data event of this connection.
func (c *connDecoder) event(ev *trace.Event) {
	if ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv {
		return
	}
	c.ev = ev
	c.data += max(ev.Bytes, 0)
	if ev.Op == trace.OpFrameSend || ev.Op == trace.OpFrameRecv {
		c.explained += max(ev.Bytes, 0) // a tracer's frames are whole messages
		c.tracerFrame(ev)
		return
	}
	if c.reqDir == trace.DirNone {
		c.setup(ev)
	} else if !c.framed {
		c.initFramers() // the connection began with tracer frames
	}
	c.seq++
	switch c.spec.Kind {
	case "binary":
		if c.framers[ev.Dir] == nil {
			c.makeFramers()
		}
		c.framers[ev.Dir].call(c.seq, ev.TS, ev.TS+ev.Dur, ev.Bytes, ev.Payload, c)
		c.touch()
	case "resp":
		c.respCall(ev)
	case "http", "line":
		c.textCall(ev)
	default:
		c.rawCall(ev)
	}
}

// frame receives a frame rebuilt by one of the framers.
func (c *connDecoder) frame(fi *frameInfo) {
	ev := c.ev
	if !c.variantDone {
		c.venusVariant(fi)
	}
	if !fi.truncated && !fi.lostSync {
		c.explained += fi.size
	}
	d := c.d
	m := d.slot()
	m.Trace, m.Conn, m.Dir, m.TS, m.End, m.PID, m.TID = d.trace, ev.Conn, ev.Dir, fi.ts, fi.end, ev.PID, ev.TID
	m.Source, m.Protocol, m.Command, m.Name, m.Size, m.Status, m.Calls, m.Digest = ev.Source, c.spec.Name, 0, "", fi.size, 0, fi.calls, 0
	m.WantsReply, m.IsReply, m.Push, m.Blocks, m.ReqID, m.RTT, m.ReqTS, m.ReqEnd = false, false, false, false, fi.reqID, 0, 0, 0
	m.FirstEnd, m.CallNS, m.Answered, m.Batch, m.Truncated, m.LostSync, m.spec = fi.firstEnd, fi.callNS, 0, nil, fi.truncated, fi.lostSync, c.spec
	var ri recordInfo
	if r := c.spec.Records; r != nil && len(fi.peek) >= r.Offset+r.Bytes { // a record in the head
		c.spec.walkRecords(&ri, fi.peek, fi.size)
		if ri.parsed > 0 && c.spec.Records.ReqID != nil {
			m.ReqID = ri.reqID
		}
	}
	if ev.Dir == c.reqDir && !(ri.reply && ri.complete) { // a reply record in the request direction: only a whole walk is believed
		if fi.hasCmd {
			m.Command = fi.cmd
			m.Name = c.spec.CommandName(fi.cmd)
		}
		switch {
		case c.spec.Stream != "":
			m.WantsReply = c.streamRequest(m, fi)
		case ri.parsed > 0 && c.spec.Records.Flags != nil:
			m.WantsReply = ri.wants
		case c.spec.Request.Flags != nil && c.spec.Request.Flags.Mask != 0:
			m.WantsReply = fi.hasFlags && fi.flags&c.spec.Request.Flags.Mask != 0
		default:
			m.WantsReply = fi.hasCmd && c.spec.WantsReply(fi.cmd, c.version)
		}
		h := hintNo
		switch {
		case m.WantsReply:
			h = hintYes
			m.Digest = c.requestDigest(fi.seen)
		case ri.parsed > 0 && !ri.complete && m.ReqID != 0:
			h = hintMaybe // a record past the head may want a reply
		}
		// the request is written into its queue slot, field by field (pairer.slot)
		p := c.pairs.slot(h)
		p.ts, p.end, p.cmd, p.name, p.tid, p.hasCmd = m.TS, m.End, m.Command, m.Name, m.TID, fi.hasCmd
		if c.spec.Records != nil {
			p.reqID = m.ReqID
		}
		c.pairs.queued(p)
	} else {
		m.IsReply = true
		var id uint64
		if c.spec.Records != nil {
			id = m.ReqID
		}
		p := c.pairs.answer(id)
		ok := p != nil
		if ok {
			m.Command, m.Name, m.ReqTS, m.ReqEnd, m.RTT, m.Answered = p.cmd, p.name, p.ts, p.end, m.End-p.ts, 1
			if c.spec.hasVer && p.hasCmd && p.cmd == c.spec.verCmdID {
				c.learnVersion(fi.peek)
			}
		} else {
			// a reply is named by the request it answers; its own first bytes say nothing
			m.Command, m.Name = 0, ""
		}
		// further reply records in the frame answer further requests
		if ri.nReply == 0 || ri.nReply == 1 && ok && ri.replyIDs[0] == m.ReqID {
			c.d.deliver(m)
			return
		}
		c.moreReplies(m, &ri, ok)
		return
	}
	c.d.deliver(m)
}

// moreReplies delivers reply m, which holds several reply records, and reports the further
// requests it answers.
func (c *connDecoder) moreReplies(m *Message, ri *recordInfo, paired bool) {
	var more [maxReplyIDs]pendingReq
	n := 0
	for k := 0; k < ri.nReply; k++ {
		if id := ri.replyIDs[k]; id != m.ReqID || !paired {
			if q, found := c.pairs.byReqID(id); found {
				more[n] = q
				n++
			}
		}
	}
	m.Answered += n
	c.d.deliver(m)
	for k := 0; k < n; k++ {
		c.d.out.Answered(m, Answered{ReqTS: more[k].ts, ReqEnd: more[k].end, Command: more[k].cmd, Name: more[k].name})
	}
}

func (c *connDecoder) learnVersion(peek []byte) {
	off := c.spec.VersionField.Offset
	if off+3 > len(peek) {
		return
	}
	c.version = [3]int{int(peek[off]), int(peek[off+1]), int(peek[off+2])}
	c.d.versions[c.id] = c.version
}

// push queues a request that wants a reply (protocols whose decoder knows every request
// is answered, in order).
func (c *connDecoder) push(p pendingReq) {
	if p.end == 0 {
		p.end = p.ts
	}
	c.pairs.add(p, hintYes)
}

// pushID keeps a request awaiting the reply that carries its id.
func (c *connDecoder) pushID(p pendingReq) {
	if c.byID == nil {
		c.byID = map[uint64]pendingReq{}
	}
	if _, dup := c.byID[p.reqID]; !dup && len(c.byID) >= maxPending {
		for k, q := range c.byID { // drop one: a request whose reply never came
			delete(c.byID, k)
			if !q.maybe {
				c.dropped++
			}
			break
		}
	}
	c.byID[p.reqID] = p
}

// popID returns the request with id, if one awaits.
func (c *connDecoder) popID(id uint64) (pendingReq, bool) {
	if id == 0 || c.byID == nil {
		return pendingReq{}, false
	}
	p, ok := c.byID[id]
	if ok {
		delete(c.byID, id)
	}
	return p, ok
}

// pop returns the request that a reply answers.
func (c *connDecoder) pop() (pendingReq, bool) { return c.pairs.reply(0) }

// tracerFrame takes a frame event from an in-process tracer: the frame is already whole and
// carries its command and request id; replies are paired by request id (the first frame of an
// id on the connection is the request). The payload head, when the spec has records, says
// whether the frame wants a reply or is one.
func (c *connDecoder) tracerFrame(ev *trace.Event) {
	c.tracer = true
	if c.spec == nil {
		c.spec = c.d.choice(ev)
		c.version = c.spec.defVer
	}
	if c.reqDir == trace.DirNone {
		c.reqDir = ev.Dir
		c.d.protos[c.spec.Name] = true
	}
	m := c.d.msg(c, ev)
	m.Size, m.Calls = ev.Bytes, 1
	m.ReqID = ev.ReqID
	m.Command = uint64(ev.Command)
	m.Name = c.spec.CommandName(m.Command)
	var ri recordInfo
	c.spec.walkRecords(&ri, ev.Payload, ev.Bytes)
	known := ri.parsed > 0 && c.spec.Records != nil && c.spec.Records.Flags != nil
	if !known && c.spec.Kind == "binary" && c.spec.Request.Flags != nil && c.spec.Request.Flags.Mask != 0 {
		// no whole record in the head: the frame header's flags field, when the head holds it
		var f framer
		f.spec, f.hdr, f.order = c.spec, c.spec.Request, le
		f.grab()
		defer func() { f.have = 0; f.drop() }()
		f.have = copy(f.buf[:], ev.Payload)
		magicOK := true
		if mg := c.spec.Request.Magic; mg != nil {
			v, ok := f.field(mg)
			magicOK = ok && v == mg.Value
		}
		if v, ok := f.field(c.spec.Request.Flags); ok && magicOK {
			known, ri.wants = true, v&c.spec.Request.Flags.Mask != 0
		}
	}
	p, paired := c.popID(ev.ReqID)
	switch {
	case paired:
		m.IsReply = true
		if m.Name == "" {
			m.Command, m.Name = p.cmd, p.name
		}
		m.ReqTS, m.ReqEnd, m.RTT = p.ts, p.end, m.End-p.ts
	case known && ri.reply:
		m.IsReply = true // its request is not in the trace
	case ev.ReqID != 0 && (!known || ri.wants):
		m.WantsReply = true
		c.pushID(pendingReq{ts: m.TS, end: m.End, cmd: m.Command, name: m.Name, reqID: ev.ReqID})
	}
	c.d.deliver(m)
}

// isInline reports whether p starts an inline RESP command: a word of letters ended by a
// space or CRLF.
func isInline(p []byte) bool {
	for i, ch := range p {
		switch {
		case ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z':
			if i >= 16 {
				return false
			}
		case (ch == ' ' || ch == '\r') && i > 0:
			return true
		default:
			return false
		}
	}
	return false
}

// respCommand returns the upper-case command of a RESP array of bulk strings, or "".
func respCommand(p []byte) string {
	// *N\r\n$L\r\nNAME\r\n
	i := bytes.Index(p, []byte("\r\n$"))
	if p[0] != '*' || i < 0 {
		if len(p) > 0 && p[0] != '*' { // inline command
			j := bytes.IndexAny(p, " \r\n")
			if j > 0 && j <= 32 {
				return string(bytes.ToUpper(p[:j]))
			}
		}
		return ""
	}
	rest := p[i+3:]
	j := bytes.Index(rest, []byte("\r\n"))
	if j <= 0 || j > 10 {
		return ""
	}
	l := 0
	for _, ch := range rest[:j] {
		if ch < '0' || ch > '9' {
			return ""
		}
		l = l*10 + int(ch-'0')
	}
	rest = rest[j+2:]
	if l <= 0 || l > 32 || l > len(rest) {
		return ""
	}
	return string(bytes.ToUpper(rest[:l]))
}

var le = binary.LittleEndian
