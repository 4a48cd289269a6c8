package protocol

import "slices"

// hint is what a decoder believes of a request: that it wants a reply, that it does not, or
// that it cannot tell (its records lay past the captured head). It is only a hint: pairing
// follows the replies that are actually seen.
type hint uint8

const (
	hintNo hint = iota
	hintYes
	hintMaybe
)

// pairer matches the replies of one connection to its requests. Every request is queued, in
// the order it was seen, with the decoder's hint. A reply answers, in order of preference:
//  1. the request that carries its id, when the protocol has ids;
//  2. the oldest request that is hinted to want a reply (in-order protocols answer in order),
//     but none queued before the latest request a reply named by its id: a reply whose id lay
//     past the captured head follows that one, and the requests before it still waiting had
//     their replies in bytes that were not seen (an older one would give a round trip as long
//     as the whole gap);
//  3. else the newest request still unanswered: the decoder thought none wanted a reply, but
//     one did (a reply is never left unpaired because of a hint).
//
// Requests older than the one answered that were hinted to want no reply are taken as answered
// by nothing, as their hint said. Memory is bounded by maxPending requests per connection.
type pairer struct {
	q      []pendingReq      // oldest first; q[i].seq == first+i
	first  uint64            // seq of q[0]
	next   uint64            // seq of the next request
	byID   map[uint64]uint64 // request id → seq, for protocols with ids
	named  uint64            // seq+1 of the latest request a reply named by its id (0: none)
	noneTo uint64            // every request before this seq hinted to want no reply is done (take)

	dropped    uint64 // requests hinted to want a reply, dropped from a full queue
	overridden uint64 // replies paired with a request hinted to want none
	unpaired   uint64 // replies with no request to answer
	paired     uint64 // replies paired
}

// add queues request p with hint h; id, when not 0, lets a reply name it.
func (pr *pairer) add(p pendingReq, h hint) {
	q := pr.slot(h)
	p.hint, p.seq, p.done = h, q.seq, false
	*q = p
	pr.queued(q)
}

// slot appends a request with hint h to the queue and returns it, zero but for its hint and
// order, for the caller to fill in place (no request is built apart and copied: on the hot
// path that copy waited for the stores of the message before it); queued must follow.
func (pr *pairer) slot(h hint) *pendingReq {
	if len(pr.q) == 0 {
		pr.first = pr.next
	}
	n := len(pr.q)
	if n == cap(pr.q) {
		pr.q = slices.Grow(pr.q, 1)
	}
	pr.q = pr.q[:n+1]
	q := &pr.q[n]
	*q = pendingReq{hint: h, seq: pr.next}
	pr.next++
	return q
}

// queued finishes the request slot returned, once filled in: its id is indexed, and the
// oldest request goes when the queue is full. q stays valid.
func (pr *pairer) queued(q *pendingReq) {
	if q.reqID != 0 {
		if pr.byID == nil {
			pr.byID = map[uint64]uint64{}
		}
		pr.byID[q.reqID] = q.seq
	}
	if len(pr.q) > maxPending {
		if f := &pr.q[0]; !f.done && f.hint == hintYes {
			pr.dropped++
		}
		pr.q[0].done = true
		pr.trim()
	}
}

// trim forgets the answered requests at the front of the queue.
func (pr *pairer) trim() {
	k := 0
	for k < len(pr.q) && pr.q[k].done {
		if id := pr.q[k].reqID; id != 0 && pr.byID[id] == pr.q[k].seq {
			delete(pr.byID, id)
		}
		k++
	}
	if k == 0 {
		return
	}
	pr.first += uint64(k)
	if k == len(pr.q) {
		pr.q = pr.q[:0]
		return
	}
	pr.q = pr.q[k:]
}

// take marks q[i] answered, and the unanswered requests before it, hinted to want no reply,
// answered by nothing. It returns q[i]: the slot stays as it is until the next add, which may
// reuse it.
func (pr *pairer) take(i int) *pendingReq {
	// Those before noneTo were marked by an earlier take: requests still waiting for a reply
	// at the front of the queue (not trimmed) are not walked again at every reply.
	from := 0
	if pr.noneTo > pr.first {
		from = int(min(pr.noneTo-pr.first, uint64(i)))
	}
	for k := from; k < i; k++ {
		if pr.q[k].hint == hintNo {
			pr.q[k].done = true
		}
	}
	pr.noneTo = max(pr.noneTo, pr.q[i].seq)
	p := &pr.q[i]
	p.done = true
	pr.paired++
	pr.trim()
	return p
}

// byReqID returns the request with id, if it waits for its reply.
func (pr *pairer) byReqID(id uint64) (pendingReq, bool) {
	if p := pr.takeID(id); p != nil {
		return *p, true
	}
	return pendingReq{}, false
}

// takeID is byReqID returning the request's slot (see take), or nil.
func (pr *pairer) takeID(id uint64) *pendingReq {
	if id == 0 || pr.byID == nil {
		return nil
	}
	seq, ok := pr.byID[id]
	if !ok || seq < pr.first || seq-pr.first >= uint64(len(pr.q)) {
		return nil
	}
	i := int(seq - pr.first)
	if pr.q[i].done {
		return nil
	}
	pr.named = max(pr.named, seq+1)
	return pr.take(i)
}

// reply pairs a reply (carrying request id id, or 0) with the request it answers.
func (pr *pairer) reply(id uint64) (pendingReq, bool) {
	if p := pr.answer(id); p != nil {
		return *p, true
	}
	return pendingReq{}, false
}

// answer is reply returning the request's slot (see take), or nil when none is answered.
func (pr *pairer) answer(id uint64) *pendingReq {
	if id != 0 {
		if p := pr.takeID(id); p != nil {
			return p
		}
	}
	if i := pr.inOrderAt(); i >= 0 {
		return pr.take(i)
	}
	for i := len(pr.q) - 1; i >= 0; i-- { // rule 3: the newest still unanswered
		if !pr.q[i].done {
			pr.overridden++
			return pr.take(i)
		}
	}
	pr.unpaired++
	return nil
}

// answerInOrder pairs a reply of a protocol that answers in order, some of whose requests are
// quiet (hinted maybe: answered only when the answer says something): the oldest request
// waiting that is hinted to want a reply or maybe and that may take it (ok), the requests
// before it hinted no or maybe taken as answered by nothing. Without one, the reply is
// unpaired. It returns the request's slot (see take), or nil.
func (pr *pairer) answerInOrder(ok func(*pendingReq) bool) *pendingReq {
	for i := range pr.q {
		if q := &pr.q[i]; !q.done && q.hint != hintNo && ok(q) {
			for k := 0; k < i; k++ {
				if pr.q[k].hint == hintMaybe {
					pr.q[k].done = true
				}
			}
			return pr.take(i)
		}
	}
	pr.unpaired++
	return nil
}

// inOrder returns the request that a reply without an id would answer now (rule 2), or nil.
// It answers nothing.
func (pr *pairer) inOrder() *pendingReq {
	if i := pr.inOrderAt(); i >= 0 {
		return &pr.q[i]
	}
	return nil
}

// inOrderAt is where in the queue the request of rule 2 is, -1 when there is none: the oldest
// waiting, hinted to want a reply or maybe, none before the latest a reply named by its id.
func (pr *pairer) inOrderAt() int {
	start := 0
	if pr.named > pr.first {
		start = int(min(pr.named-pr.first, uint64(len(pr.q))))
	}
	for i := start; i < len(pr.q); i++ {
		if !pr.q[i].done && pr.q[i].hint != hintNo {
			return i
		}
	}
	return -1
}

// waiting counts the requests hinted to want a reply that are still unanswered.
func (pr *pairer) waiting() uint64 {
	var n uint64
	for i := range pr.q {
		if !pr.q[i].done && pr.q[i].hint == hintYes {
			n++
		}
	}
	return n
}

// Answered is a further request that a reply answered, besides its first (a server that
// batches the replies to several requests into one frame).
type Answered struct {
	ReqTS, ReqEnd int64 // the request's first call's start and last call's end, ns
	Command       uint64
	Name          string
}

// Pairing sums the pairing counts of the trace's connections.
func (d *Decoder) Pairing() (paired, unpaired, overridden uint64) {
	paired, unpaired, overridden = d.retired.paired, d.retired.unpaired, d.retired.overridden
	for _, c := range d.conns {
		paired += c.pairs.paired
		unpaired += c.pairs.unpaired
		overridden += c.pairs.overridden
	}
	return
}

// Undecoded sums the bytes the trace's framers could not decode, and all bytes they saw.
func (d *Decoder) Undecoded() (lost, seen int64) {
	lost, seen = d.retired.lostBytes, d.retired.seenBytes
	for _, c := range d.conns {
		lost += c.lostBytes
		seen += c.seenBytes
		for _, f := range c.framers {
			if f != nil {
				lost += f.lostBytes
				seen += f.seenBytes
			}
		}
	}
	return
}
