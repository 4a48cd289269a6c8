package protocol

import (
	"bufio"
	"io"

	"github.com/perflab/perflab/trace"
)

// trialEvents is how many data events of each connection every candidate decoder is tried on
// when the protocol is chosen automatically.
const trialEvents = 256

// maxTrialConns bounds how many connections are on trial at once. Every candidate decoder keeps
// state for each connection on trial, so a trace of many short connections (which never reach
// trialEvents) would otherwise hold five decoders' state for all of them until the end: beyond
// this many, the connection on trial the longest is decided on what it has shown.
const maxTrialConns = 4096

// candidates are the protocols auto detection tries on each connection, in order of
// preference when two explain as many bytes. venus tells venusd's framing from real Venus
// itself; raw explains nothing and is what is left.
var candidates = []string{"venus", "ggml-rpc", "resp", "http", "memcached"}

// choose reads the trace f (named path) and chooses, for each connection, the protocol whose
// decoder explains the most bytes of its first trialEvents data events (bytes of messages it
// decoded whole). Connections of a tracer's frame events keep the first-bytes detection.
// last gives, by connection, the number of its last data event among the trace's data events
// (countsForRetire, numbered from 1 in file order), which lets the main pass retire it there.
func choose(i int, path string, f io.Reader) (chosen map[uint64]*Spec, last map[uint64]int64, err error) {
	r, err := trace.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, nil, &ReadError{path, err}
	}
	sink := &msgSink{fn: func(*Message) error { return nil }}
	decs := make([]*Decoder, len(candidates))
	for k, n := range candidates {
		s, err := BuiltinSpec(n)
		if err != nil {
			return nil, nil, err
		}
		if decs[k], err = NewDecoder(i, s, sink); err != nil {
			return nil, nil, err
		}
	}
	first, err := NewDecoder(i, nil, sink) // for the first-bytes detection
	if err != nil {
		return nil, nil, err
	}
	seen := map[uint64]int{} // data events tried, by connection; -1: not tried
	chosen = map[uint64]*Spec{}
	last = map[uint64]int64{}
	var n int64
	cfm := NewCipherFilter(r.Meta()) // asked as the main pass asks, of every event
	var trial []uint64               // connections on trial, oldest first (some may be decided already)
	var rec trace.Record
	cf := NewCipherFilter(r.Meta())
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			break // the main pass reports it
		}
		ev := &rec.Event
		if rec.Kind == trace.KindEvent && countsForRetire(ev, cfm.Cipher(ev)) {
			n++
			last[connKey(ev)] = n
		}
		if rec.Kind != trace.KindEvent || ev.Errno != 0 || ev.Bytes <= 0 || ev.Dir != trace.DirSend && ev.Dir != trace.DirRecv || cf.Cipher(ev) {
			continue
		}
		key := connKey(ev)
		k, ok := seen[key]
		if !ok {
			// A tracer's frames, the Venus magic and a ggml-rpc HELLO say what the connection
			// speaks; the others are tried.
			if sp := first.detect(ev); sp.Name == "venus" || sp.Name == "ggml-rpc" {
				seen[key] = -1
				continue
			}
		}
		if k < 0 || k >= trialEvents {
			continue
		}
		if k == 0 {
			trial = append(trial, key)
			for len(trial) > maxTrialConns {
				old := trial[0]
				trial = trial[1:]
				if n := seen[old]; n > 0 && n < trialEvents {
					chosen[old] = best(decs, old)
					seen[old] = trialEvents
				}
			}
		}
		seen[key] = k + 1
		for _, d := range decs {
			d.Event(ev)
		}
		if k+1 == trialEvents {
			chosen[key] = best(decs, key)
		}
	}
	for _, d := range decs {
		d.Flush()
	}
	for key, k := range seen {
		if k > 0 && k < trialEvents {
			chosen[key] = best(decs, key)
		}
	}
	return chosen, last, nil
}

// minTrialShare is the least share of a connection's bytes a decoder must explain to be
// chosen for it; below, the connection is raw.
const minTrialShare = 0.5

// best returns the candidate that explained the most of connection key's bytes, and forgets
// the candidates' state of it.
func best(decs []*Decoder, key uint64) *Spec {
	var sp *Spec
	var most, data int64
	for _, d := range decs {
		c := d.conns[key]
		if c == nil {
			continue
		}
		data = c.data
		if x := c.decoded(); x > most {
			sp, most = c.spec, x
		}
		delete(d.conns, key)
	}
	if sp == nil || float64(most) < minTrialShare*float64(data) {
		sp, _ = BuiltinSpec("raw")
	}
	return sp
}

// connKey is the key of an event's connection in decoder.conns.
// TLS plaintext has a stream of its own, next to the ciphertext of the same connection.
func connKey(ev *trace.Event) uint64 {
	if ev.Conn == 0 {
		return 1<<63 | uint64(ev.PID)
	}
	if ev.Op.Plaintext() {
		return 1<<62 | ev.Conn
	}
	return ev.Conn
}

// decoded returns the bytes of the connection that its decoder explained: bytes of messages
// decoded whole.
func (c *connDecoder) decoded() int64 {
	x := c.explained
	for _, st := range c.text {
		if st != nil {
			x += st.explained
		}
	}
	return min(x, c.data)
}
