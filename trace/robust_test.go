package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"io"
	"math/rand"
	"testing"
)

// chunkSpan is where one chunk of a clean file lies.
type chunkSpan struct {
	start, end int
	typ        byte
}

// chunkSpans walks a clean file by its chunk headers.
func chunkSpans(t testing.TB, data []byte) []chunkSpan {
	t.Helper()
	var out []chunkSpan
	for p := headerSize; p < len(data); {
		h, ok := parseChunkHeader(data[p:], chunkHeaderSize)
		if !ok {
			t.Fatalf("clean file has a bad chunk header at %d", p)
		}
		end := p + chunkHeaderSize + int(h.length)
		out = append(out, chunkSpan{p, end, h.typ})
		p = end
	}
	return out
}

// fingerprint hashes a record, payload and strings included.
func fingerprint(w *written) uint64 {
	b := fpBuf[:0]
	b = append(b, byte(w.Kind))
	switch w.Kind {
	case KindEvent:
		e := &w.Event
		for _, v := range []uint64{uint64(e.TS), uint64(e.Dur), uint64(e.PID), uint64(e.TID), e.Conn, uint64(e.Dir), uint64(e.Op),
			uint64(e.Source), uint64(e.Bytes), uint64(e.Errno), uint64(e.Command), e.ReqID} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = append(b, e.Payload...)
	case KindConnection:
		c := &w.Conn
		for _, v := range []uint64{c.ID, uint64(c.Family), uint64(c.PID), uint64(c.FirstSeen), uint64(c.LastSeen)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = append(b, c.Local...)
		b = append(b, 0)
		b = append(b, c.Remote...)
	case KindMarker:
		m := &w.Marker
		for _, v := range []uint64{uint64(m.TS), uint64(m.Dur), uint64(m.PID), uint64(m.TID), uint64(m.Value)} {
			b = binary.LittleEndian.AppendUint64(b, v)
		}
		b = append(b, m.Name...)
		b = append(b, 0)
		b = append(b, m.Text...)
	case KindLost:
		b = append(b, w.Lost.Source...)
		b = binary.LittleEndian.AppendUint64(b, w.Lost.Count)
	}
	fpBuf = b
	return maphash.Bytes(fpSeed, b)
}

var (
	fpSeed = maphash.MakeSeed()
	fpBuf  []byte
)

// sampleTrace is a clean trace whose records chunks hold exactly perChunk records each (the
// last may hold fewer).
type sampleTrace struct {
	data     []byte
	prints   []uint64 // fingerprint of every record, in order
	spans    []chunkSpan
	perChunk int
}

func makeSample(t testing.TB, records, perChunk int, seed int64) *sampleTrace {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	var set []written
	for len(set) < records {
		set = append(set, randSet(rng)...)
	}
	set = set[:records]
	for i := range set {
		// Short payload heads keep the file small, so that thousands of cuts read quickly.
		if p := set[i].Event.Payload; len(p) > 8 {
			set[i].Event.Payload = p[:8]
		}
	}
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: perChunk, FlushInterval: -1, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	writeSet(t, w, set)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s := &sampleTrace{data: buf.Bytes(), perChunk: perChunk}
	for i := range set {
		s.prints = append(s.prints, fingerprint(&set[i]))
	}
	s.spans = chunkSpans(t, s.data)
	return s
}

// decodePrints reads data and returns the fingerprints of its records and the reader.
func decodePrints(data []byte) ([]uint64, *Reader, error) {
	return decodeFrom(bytes.NewReader(data))
}

func decodeFrom(src io.Reader) ([]uint64, *Reader, error) {
	r, err := NewReader(src)
	if err != nil {
		return nil, nil, err
	}
	var out []uint64
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return out, r, nil
		}
		if err != nil {
			return out, r, err
		}
		w := written(rec)
		out = append(out, fingerprint(&w))
	}
}

// recordsOf returns the fingerprints of the records in the records chunks i for which keep(i)
// is true (i counts records chunks only).
func (s *sampleTrace) recordsOf(keep func(i int) bool) []uint64 {
	var out []uint64
	i := 0
	for _, sp := range s.spans {
		if sp.typ != chunkRecords {
			continue
		}
		if keep(i) {
			lo := i * s.perChunk
			out = append(out, s.prints[lo:min(lo+s.perChunk, len(s.prints))]...)
		}
		i++
	}
	return out
}

func equalPrints(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTruncation is RELIABILITY A2: a trace of about 200 chunks cut at every byte of its last
// three chunks and at 2,000 random offsets yields exactly the records of the complete chunks,
// and truncated_bytes is the size minus the end of the last complete chunk.
func TestTruncation(t *testing.T) {
	s := makeSample(t, 200*5, 5, 2)
	t.Logf("sample: %d bytes, %d chunks", len(s.data), len(s.spans))
	if n := len(s.spans); n < 200 {
		t.Fatalf("sample has %d chunks, want about 200", n)
	}
	var cuts []int
	for c := s.spans[len(s.spans)-3].start; c <= len(s.data); c++ {
		cuts = append(cuts, c)
	}
	rng := rand.New(rand.NewSource(3))
	random := 2000
	if testing.Short() || raceEnabled {
		random = 200
	}
	for i := 0; i < random; i++ {
		cuts = append(cuts, rng.Intn(len(s.data)+1))
	}
	cuts = append(cuts, 0, 1, headerSize-1, headerSize, headerSize+1, s.spans[0].end-1, s.spans[0].end)
	for _, c := range cuts {
		lastEnd, complete := headerSize, 0
		for _, sp := range s.spans {
			if sp.end <= c {
				lastEnd = sp.end
				complete++
			}
		}
		got, r, err := decodePrints(s.data[:c])
		if complete == 0 {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("cut at %d (no complete chunk): err %v, want a *FormatError", c, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", c, err)
		}
		want := s.recordsOf(func(i int) bool { return s.spans[i+1].end <= c })
		if !equalPrints(got, want) {
			t.Fatalf("cut at %d: %d records, want %d (the complete chunks')", c, len(got), len(want))
		}
		rec := r.Recovery()
		if rec.TruncatedBytes != int64(c-lastEnd) || rec.ChunksBad != 0 || rec.BytesSkipped != 0 || rec.ChunksRead != complete {
			t.Fatalf("cut at %d: recovery %+v, want %d truncated bytes and %d chunks read", c, rec, c-lastEnd, complete)
		}
		if rec.Clean != (c == len(s.data)) {
			t.Fatalf("cut at %d: clean=%v", c, rec.Clean)
		}
	}
}

// damageCheck reads a damaged copy of s and checks RELIABILITY A3's criteria: a damaged file
// header is an error; every damaged chunk is rejected (no record of it comes back); every intact
// chunk is read; chunks_bad counts the damaged chunks, except that a chunk whose header is
// damaged right after another damaged header is passed over by the same resynchronisation.
func damageCheck(t *testing.T, s *sampleTrace, data []byte, what string) {
	t.Helper()
	if !bytes.Equal(data[:headerSize], s.data[:headerSize]) {
		if _, _, err := decodePrints(data); err == nil {
			t.Fatalf("%s: damaged file header read without error", what)
		}
		return
	}
	damaged := make([]bool, len(s.spans))
	headerBad := make([]bool, len(s.spans))
	wantBad := 0
	for i, sp := range s.spans {
		damaged[i] = !bytes.Equal(data[sp.start:sp.end], s.data[sp.start:sp.end])
		headerBad[i] = !bytes.Equal(data[sp.start:sp.start+chunkHeaderSize], s.data[sp.start:sp.start+chunkHeaderSize])
		if damaged[i] && !(headerBad[i] && i > 0 && headerBad[i-1]) {
			wantBad++
		}
	}
	got, r, err := decodePrints(data)
	allBad := true
	for _, d := range damaged {
		allBad = allBad && d
	}
	if allBad {
		if err == nil {
			t.Fatalf("%s: every chunk damaged, yet no error", what)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := s.recordsOf(func(i int) bool { return !damaged[i+1] })
	if !equalPrints(got, want) {
		t.Fatalf("%s: %d records, want %d (those of the intact chunks)", what, len(got), len(want))
	}
	rec := r.Recovery()
	if rec.ChunksBad != wantBad {
		t.Fatalf("%s: chunks_bad %d, want %d (recovery %+v)", what, rec.ChunksBad, wantBad, rec)
	}
	intact := 0
	for _, d := range damaged {
		if !d {
			intact++
		}
	}
	if rec.ChunksRead != intact {
		t.Fatalf("%s: chunks_read %d, want %d", what, rec.ChunksRead, intact)
	}
	if !damaged[0] && !equalMeta(r.Meta(), testMeta) {
		t.Fatalf("%s: meta chunk intact but meta differs", what)
	}
}

func equalMeta(a, b Meta) bool {
	return a.Host == b.Host && a.Version == b.Version && a.StartMono == b.StartMono && a.Start.Equal(b.Start)
}

// TestBitFlips is RELIABILITY A3: 10,000 copies with 1 to 8 random bit flips and 1,000 with a
// random 64-byte garbage span.
func TestBitFlips(t *testing.T) {
	s := makeSample(t, 60*20, 20, 4)
	rng := rand.New(rand.NewSource(5))
	data := make([]byte, len(s.data))
	flips, spans := 10_000, 1000
	if testing.Short() || raceEnabled {
		flips, spans = 1000, 100
	}
	for i := 0; i < flips; i++ {
		copy(data, s.data)
		n := 1 + rng.Intn(8)
		for j := 0; j < n; j++ {
			bit := rng.Intn(len(data) * 8)
			data[bit/8] ^= 1 << (bit % 8)
		}
		damageCheck(t, s, data, "flips")
	}
	for i := 0; i < spans; i++ {
		copy(data, s.data)
		at := rng.Intn(len(data) - 64)
		rng.Read(data[at : at+64])
		damageCheck(t, s, data, "garbage span")
	}
}

// faultyWriter accepts budget bytes, then writes what fits and fails with err (ENOSPC-like).
type faultyWriter struct {
	buf    bytes.Buffer
	budget int
	err    error
}

func (f *faultyWriter) Write(p []byte) (int, error) {
	if len(p) <= f.budget {
		f.budget -= len(p)
		return f.buf.Write(p)
	}
	n := f.budget
	f.buf.Write(p[:n])
	f.budget = 0
	return n, f.err
}

// TestWriteFaults is the trace side of RELIABILITY B4: a writer over an io.Writer that fails
// after N bytes (with a short write) reports the error, refuses further records, and leaves a
// prefix that reads back as exactly the records of its complete chunks.
func TestWriteFaults(t *testing.T) {
	clean := makeSample(t, 300, 10, 8)
	errNoSpace := errors.New("no space left on device")
	for budget := 0; budget <= len(clean.data); budget += 1 + budget/40 {
		fw := &faultyWriter{budget: budget, err: errNoSpace}
		w, err := NewWriter(fw, testMeta, &WriterOptions{FlushRecords: 10, FlushInterval: -1, Now: fixedNow})
		if err != nil {
			if !errors.Is(err, errNoSpace) {
				t.Fatalf("budget %d: NewWriter: %v", budget, err)
			}
			continue
		}
		rng := rand.New(rand.NewSource(8))
		var set []written
		for len(set) < 300 {
			set = append(set, randSet(rng)...)
		}
		var failed error
		for i := range set[:300] {
			r := &set[i]
			if p := r.Event.Payload; len(p) > 8 {
				r.Event.Payload = p[:8]
			}
			switch r.Kind {
			case KindEvent:
				failed = w.WriteEvent(&r.Event)
			case KindConnection:
				failed = w.WriteConnection(&r.Conn)
			case KindMarker:
				failed = w.WriteMarker(&r.Marker)
			case KindLost:
				failed = w.WriteLost(r.Lost.Source, r.Lost.Count)
			}
			if failed != nil {
				break
			}
		}
		cerr := w.Close()
		if budget < len(clean.data) {
			if failed == nil && cerr == nil {
				t.Fatalf("budget %d of %d: no error reported", budget, len(clean.data))
			}
			if e := failed; e != nil && !errors.Is(e, errNoSpace) || cerr != nil && !errors.Is(cerr, errNoSpace) {
				t.Fatalf("budget %d: errors %v / %v do not wrap the writer's", budget, failed, cerr)
			}
			if err := w.WriteEvent(&Event{}); err == nil {
				t.Fatalf("budget %d: write accepted after a failure", budget)
			}
		} else if failed != nil || cerr != nil {
			t.Fatalf("budget %d: %v / %v with room to spare", budget, failed, cerr)
		}
		got := fw.buf.Bytes()
		if !bytes.Equal(got, clean.data[:len(got)]) {
			t.Fatalf("budget %d: output is not a prefix of the clean file", budget)
		}
		prints, r, err := decodePrints(got)
		complete := 0
		for _, sp := range clean.spans {
			if sp.end <= len(got) {
				complete++
			}
		}
		if complete == 0 {
			if err == nil {
				t.Fatalf("budget %d: no complete chunk, yet no error", budget)
			}
			continue
		}
		if err != nil {
			t.Fatalf("budget %d: %v", budget, err)
		}
		want := clean.recordsOf(func(i int) bool { return clean.spans[i+1].end <= len(got) })
		if !equalPrints(prints, want) || r.Recovery().ChunksBad != 0 {
			t.Fatalf("budget %d: %d records (recovery %v), want %d", budget, len(prints), r.Recovery(), len(want))
		}
	}
}
