package trace

import (
	"bytes"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// orderTrace writes a clean trace of n events with distinct timestamps, chunks of perChunk
// records, and returns its bytes.
func orderTrace(t testing.TB, n, perChunk int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: perChunk, FlushInterval: -1, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := w.WriteEvent(&Event{TS: int64(1000 + i), Dur: 1, PID: 1, TID: 1, Conn: 1, Dir: DirSend, Op: OpSendto, Bytes: 8}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readTS reads data and returns how many times each event timestamp came, and the recovery.
func readTS(t testing.TB, data []byte) (map[int64]int, Recovery) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindEvent {
			seen[rec.Event.TS]++
		}
	}
	return seen, r.Recovery()
}

// TestChunkOrder: chunks duplicated, swapped, removed or appended after the footer are
// detected and counted, and no event is ever read twice.
func TestChunkOrder(t *testing.T) {
	const n, per = 200, 10 // 20 records chunks: meta = 0, records 1..20, footer 21
	data := orderTrace(t, n, per)
	sp := chunkSpans(t, data)
	if len(sp) != 22 {
		t.Fatalf("%d chunks, want 22", len(sp))
	}
	chunk := func(i int) []byte { return data[sp[i].start:sp[i].end] }
	build := func(order ...int) []byte {
		out := append([]byte(nil), data[:headerSize]...)
		for _, i := range order {
			out = append(out, chunk(i)...)
		}
		return out
	}
	seq := func(from, to int) []int {
		var s []int
		for i := from; i <= to; i++ {
			s = append(s, i)
		}
		return s
	}
	cat := func(parts ...[]int) []int {
		var s []int
		for _, p := range parts {
			s = append(s, p...)
		}
		return s
	}
	other := orderTrace(t, 30, per) // another recording, appended whole
	for _, tc := range []struct {
		name  string
		data  []byte
		want  Recovery // the out-of-place counts
		lost  int      // events of chunks not read
		clean bool
	}{
		{"clean", data, Recovery{}, 0, true},
		{"chunk duplicated in place", build(cat(seq(0, 5), []int{5}, seq(6, 21))...), Recovery{ChunksDuplicate: 1}, 0, true},
		{"chunk duplicated later", build(cat(seq(0, 15), []int{3}, seq(16, 21))...), Recovery{ChunksDuplicate: 1}, 0, true},
		{"all records twice", build(cat(seq(0, 20), seq(1, 21))...), Recovery{ChunksDuplicate: 20}, 0, true},
		{"meta duplicated", build(cat([]int{0, 0}, seq(1, 21))...), Recovery{ChunksDuplicate: 1}, 0, true},
		{"two chunks swapped", build(cat(seq(0, 4), []int{6, 5}, seq(7, 21))...), Recovery{ChunksReordered: 1}, 0, true},
		{"chunk moved to the end", build(cat([]int{0}, seq(2, 20), []int{1, 21})...), Recovery{ChunksReordered: 1}, 0, true},
		{"chunk removed", build(cat(seq(0, 7), seq(9, 21))...), Recovery{ChunksMissing: 1}, per, true},
		{"chunk after the footer", build(cat(seq(0, 21), []int{4})...), Recovery{ChunksAfterFooter: 1}, 0, true},
		{"footer twice", build(cat(seq(0, 21), []int{21})...), Recovery{ChunksAfterFooter: 1}, 0, true},
		{"another trace appended", append(append([]byte(nil), data...), other...), Recovery{ChunksAfterFooter: 5}, 0, true}, // its meta, 3 records chunks and footer (the header bytes are skipped)
		{"cut, then duplicated", build(cat(seq(0, 10), seq(5, 10))...), Recovery{ChunksDuplicate: 6}, n - 10*per, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen, rec := readTS(t, tc.data)
			for ts, c := range seen {
				if c != 1 {
					t.Fatalf("event at %d read %d times", ts, c)
				}
			}
			if got := n - len(seen); got != tc.lost {
				t.Errorf("%d events not read, want %d", got, tc.lost)
			}
			got := Recovery{ChunksDuplicate: rec.ChunksDuplicate, ChunksReordered: rec.ChunksReordered,
				ChunksAfterFooter: rec.ChunksAfterFooter, ChunksMissing: rec.ChunksMissing, ChunksExtra: rec.ChunksExtra}
			if got != tc.want {
				t.Errorf("recovery %+v, want %+v", rec, tc.want)
			}
			if rec.Clean != tc.clean {
				t.Errorf("clean %v, want %v", rec.Clean, tc.clean)
			}
			if damaged := tc.want != (Recovery{}) || !tc.clean; rec.Damaged() != damaged {
				t.Errorf("Damaged() = %v, want %v (%v)", rec.Damaged(), damaged, rec)
			}
		})
	}
}

// TestChunkOrderRandom shuffles, duplicates, drops and appends chunks at random: every event
// is read at most once, exactly the events of the chunks kept are read, and the counts add up.
func TestChunkOrderRandom(t *testing.T) {
	const n, per = 300, 7
	data := orderTrace(t, n, per)
	sp := chunkSpans(t, data)
	rng := rand.New(rand.NewSource(19))
	iters := 2000
	if testing.Short() || raceEnabled {
		iters = 200
	}
	for it := 0; it < iters; it++ {
		// A random sequence of chunk indexes before the footer, then the footer, then maybe more.
		var order []int
		present := map[int]bool{}
		dups := 0
		for len(order) < len(sp)-1+rng.Intn(10) {
			i := 1 + rng.Intn(len(sp)-2)
			if rng.Intn(8) == 0 {
				continue
			}
			if present[i] {
				dups++
			}
			present[i] = true
			order = append(order, i)
		}
		after := rng.Intn(3)
		out := append([]byte(nil), data[:headerSize]...)
		out = append(out, data[sp[0].start:sp[0].end]...)
		for _, i := range order {
			out = append(out, data[sp[i].start:sp[i].end]...)
		}
		out = append(out, data[sp[len(sp)-1].start:sp[len(sp)-1].end]...)
		for k := 0; k < after; k++ {
			i := 1 + rng.Intn(len(sp)-2)
			out = append(out, data[sp[i].start:sp[i].end]...)
		}
		seen, rec := readTS(t, out)
		want := 0
		for i := range present {
			want += min(per, n-(i-1)*per)
		}
		for ts, c := range seen {
			if c != 1 {
				t.Fatalf("iteration %d: event at %d read %d times", it, ts, c)
			}
		}
		if len(seen) != want {
			t.Fatalf("iteration %d: %d events read, want %d", it, len(seen), want)
		}
		missing := len(sp) - 2 - len(present)
		if rec.ChunksDuplicate != dups || rec.ChunksAfterFooter != after || rec.ChunksMissing != missing {
			t.Fatalf("iteration %d: %v; want %d duplicates, %d after the footer, %d missing", it, rec, dups, after, missing)
		}
		if rec.ChunksRead != 2+len(present) {
			t.Fatalf("iteration %d: %d chunks read, want %d", it, rec.ChunksRead, 2+len(present))
		}
	}
}

// TestChunkOrderV1: a format-1 file has no sequence numbers; chunks after the footer are still
// skipped, and the footer's chunk count reveals duplicates (ChunksExtra) and losses.
func TestChunkOrderV1(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "compat", "v1.plt"))
	if err != nil {
		t.Fatal(err)
	}
	var sp []chunkSpan
	for p := headerSize; p < len(data); {
		h, ok := parseChunkHeader(data[p:], chunkHeaderSizeV1)
		if !ok {
			t.Fatalf("bad chunk header at %d", p)
		}
		end := p + chunkHeaderSizeV1 + int(h.length)
		sp = append(sp, chunkSpan{p, end, h.typ})
		p = end
	}
	chunk := func(i int) []byte { return data[sp[i].start:sp[i].end] }
	build := func(order ...int) []byte {
		out := append([]byte(nil), data[:headerSize]...)
		for _, i := range order {
			out = append(out, chunk(i)...)
		}
		return out
	}
	all := func() []int {
		s := make([]int, len(sp))
		for i := range s {
			s[i] = i
		}
		return s
	}
	for _, tc := range []struct {
		name string
		data []byte
		want Recovery
	}{
		{"clean", data, Recovery{}},
		{"after the footer", build(append(all(), 3)...), Recovery{ChunksAfterFooter: 1}},
		{"duplicated", build(append([]int{0, 1, 2, 2}, all()[3:]...)...), Recovery{ChunksExtra: 1}},
		{"removed", build(append([]int{0, 1}, all()[3:]...)...), Recovery{ChunksMissing: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Read(bytes.NewReader(tc.data))
			if err != nil {
				t.Fatal(err)
			}
			rec := f.Recovery
			got := Recovery{ChunksDuplicate: rec.ChunksDuplicate, ChunksReordered: rec.ChunksReordered,
				ChunksAfterFooter: rec.ChunksAfterFooter, ChunksMissing: rec.ChunksMissing, ChunksExtra: rec.ChunksExtra}
			if got != tc.want || !rec.Clean {
				t.Errorf("recovery %v, want %+v", rec, tc.want)
			}
			if rec.Damaged() != (tc.want != Recovery{}) {
				t.Errorf("Damaged() = %v", rec.Damaged())
			}
		})
	}
}
