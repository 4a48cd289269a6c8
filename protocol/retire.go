package protocol

import "github.com/perflab/perflab/trace"

// retired holds what the decoder keeps of the connections it has finished (retire): their
// counts, summed, one ConnInfo per protocol standing for them all (Count), and one of its own
// for each RESP connection (its warnings name it), so that a trace of many short connections
// holds a connection's decoding state only while it carries data.
type retired struct {
	lostSync, dropped, waiting       uint64
	paired, unpaired, overridden     uint64
	lostBytes, seenBytes             int64
	rawConns, rawUnsafe, rawExchange uint64
	rawUnsafeIDs                     map[uint64]bool
	venus                            int // connections still decoded as venusd's framing
	bySpec                           map[*Spec]*retiredAgg
	infos                            []ConnInfo // RESP connections
}

// retiredAgg sums the retired connections of one protocol; minKey is the least key among them,
// which orders it in Conns.
type retiredAgg struct {
	ConnInfo
	minKey uint64
}

// midExchange reports whether c is in the middle of an exchange: a request that may want a
// reply awaits it, a frame is partly read, or a raw burst of requests is open. Retiring it would cut the
// exchange in two (the reply's side, speaking first on a fresh decoder, would pass for the
// requests), so the pass keeps such a connection live however many others carried data since.
func (c *connDecoder) midExchange() bool {
	if c.raw != nil { // a raw exchange's reply is paired when its burst ends: look at the burst
		return c.raw.active && c.raw.dir == c.reqDir // a request burst, unanswered so far
	}
	for i := range c.pairs.q {
		if q := &c.pairs.q[i]; !q.done && q.hint != hintNo {
			return true
		}
	}
	for _, f := range c.framers {
		if f != nil && !f.idle() {
			return true
		}
	}
	return false
}

// retire ends connection key: what it holds in progress is delivered (as Flush would at the
// end of the trace), its counts are added to the decoder's, and its state is dropped.
func (d *Decoder) retire(key uint64) {
	c := d.conns[key]
	if c == nil {
		return
	}
	d.flushConn(c, &d.flushEv)
	r := &d.retired
	if !c.tracer && c.reqDir == trace.DirSend {
		r.waiting += c.pairs.waiting()
	}
	r.lostSync += c.lostSync
	r.lostBytes += c.lostBytes
	r.seenBytes += c.seenBytes
	for _, f := range c.framers {
		if f != nil {
			r.lostSync += f.lost
			r.lostBytes += f.lostBytes
			r.seenBytes += f.seenBytes
		}
	}
	if !c.tracer {
		r.dropped += c.dropped + c.pairs.dropped
	}
	r.paired += c.pairs.paired
	r.unpaired += c.pairs.unpaired
	r.overridden += c.pairs.overridden
	// A connection retired before, back with data, was counted then: it counts once.
	count := 1
	if c.first != nil {
		count = 0
	} else if !d.ending && c.spec != nil {
		d.gone.add(key, c.spec)
	}
	if c.spec != nil && c.spec.Kind == "raw" && c.reqDir != trace.DirNone && c.raw != nil {
		r.rawConns += uint64(count)
		r.rawExchange += c.raw.exchanges
		if c.raw.unsafe {
			r.rawUnsafe++
			if r.rawUnsafeIDs == nil {
				r.rawUnsafeIDs = map[uint64]bool{}
			}
			r.rawUnsafeIDs[key] = true
		}
	}
	if c.spec != nil && c.spec.Name == "venus" {
		r.venus++
	}
	var ci ConnInfo
	var rc [3]RESPCount
	c.info(&ci, &rc)
	ci.Count = count
	if ci.RESP != nil {
		ci.RESP = &[3]RESPCount{rc[0], rc[1], rc[2]}
		r.infos = append(r.infos, ci)
	} else {
		if r.bySpec == nil {
			r.bySpec = map[*Spec]*retiredAgg{}
		}
		agg := r.bySpec[ci.Spec]
		if agg == nil {
			agg = &retiredAgg{ConnInfo: ConnInfo{Spec: ci.Spec}, minKey: key}
			r.bySpec[ci.Spec] = agg
		}
		agg.minKey = min(agg.minKey, key)
		agg.Count += count
		agg.Data += ci.Data
		agg.Decoded += ci.Decoded
		agg.Unseen += ci.Unseen
		agg.Blind += ci.Blind
		agg.Rejected += ci.Rejected
	}
	d.forget(key)
	delete(d.versions, c.id)
}
