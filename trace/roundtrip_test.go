package trace

import (
	"bytes"
	"io"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/testutil"
)

// written is one record as handed to a Writer, for comparison with what a Reader returns.
type written struct {
	Kind   Kind
	Event  Event
	Conn   Connection
	Marker Marker
	Lost   Lost
}

func randString(rng *rand.Rand, max int) string {
	n := rng.Intn(max + 1)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Intn(256))
	}
	return string(b)
}

// randInt64 returns small, large and extreme values, positive and negative.
func randInt64(rng *rand.Rand) int64 {
	switch rng.Intn(6) {
	case 0:
		return 0
	case 1:
		return int64(rng.Intn(1000))
	case 2:
		return -int64(rng.Intn(1000))
	case 3:
		return rng.Int63()
	case 4:
		return -rng.Int63() - 1
	}
	return 1_000_000_000 + int64(rng.Intn(1_000_000))
}

func randUint64(rng *rand.Rand) uint64 {
	switch rng.Intn(4) {
	case 0:
		return 0
	case 1:
		return uint64(rng.Intn(100))
	case 2:
		return rng.Uint64()
	}
	return 1<<64 - 1
}

func randEvent(rng *rand.Rand, prev *Event) Event {
	var e Event
	if prev != nil && rng.Intn(3) > 0 {
		// Like a real trace: mostly the same thread and connection, time moving forward.
		e = *prev
		e.TS += int64(rng.Intn(100_000))
		e.Dir = Dir(1 + rng.Intn(2))
	} else {
		e.TS = randInt64(rng)
		e.PID = uint32(rng.Uint64())
		e.TID = uint32(rng.Intn(5))
		e.Conn = randUint64(rng)
		e.Dir = Dir(rng.Intn(5)) // 3 and 4 are not defined but must survive
		e.Op = Op(rng.Intn(20))
		e.Source = Source(rng.Intn(4))
	}
	e.Dur = randInt64(rng)
	e.Bytes = randInt64(rng)
	e.Errno, e.Command, e.ReqID, e.Payload = 0, 0, 0, nil
	if rng.Intn(4) == 0 {
		e.Errno = uint32(rng.Uint64())
	}
	if rng.Intn(3) == 0 {
		e.Command = uint32(rng.Uint64())
	}
	if rng.Intn(3) == 0 {
		e.ReqID = randUint64(rng)
	}
	if rng.Intn(3) == 0 {
		e.Payload = []byte(randString(rng, MaxPayload))
		if len(e.Payload) == 0 {
			e.Payload = nil
		}
	}
	return e
}

func randSet(rng *rand.Rand) []written {
	n := rng.Intn(40)
	out := make([]written, 0, n)
	var prev *Event
	for i := 0; i < n; i++ {
		switch k := rng.Intn(10); {
		case k < 6:
			e := randEvent(rng, prev)
			out = append(out, written{Kind: KindEvent, Event: e})
			prev = &out[len(out)-1].Event
		case k < 7:
			out = append(out, written{Kind: KindConnection, Conn: Connection{
				ID: randUint64(rng), Family: Family(rng.Intn(6)), Local: randString(rng, 40),
				Remote: randString(rng, 40), PID: uint32(rng.Uint64()),
				FirstSeen: randInt64(rng), LastSeen: randInt64(rng),
			}})
		case k < 9:
			out = append(out, written{Kind: KindMarker, Marker: Marker{
				TS: randInt64(rng), Dur: randInt64(rng), PID: uint32(rng.Uint64()), TID: uint32(rng.Intn(9)),
				Name: randString(rng, 12), Value: randInt64(rng), Text: randString(rng, 12),
			}})
		default:
			out = append(out, written{Kind: KindLost, Lost: Lost{Source: randString(rng, 8), Count: randUint64(rng)}})
		}
	}
	return out
}

func writeSet(t testing.TB, w *Writer, set []written) {
	t.Helper()
	for i := range set {
		var err error
		switch r := &set[i]; r.Kind {
		case KindEvent:
			err = w.WriteEvent(&r.Event)
		case KindConnection:
			err = w.WriteConnection(&r.Conn)
		case KindMarker:
			err = w.WriteMarker(&r.Marker)
		case KindLost:
			err = w.WriteLost(r.Lost.Source, r.Lost.Count)
		}
		if err != nil {
			t.Fatalf("write record %d: %v", i, err)
		}
	}
}

// readRecords reads every record of data in order, copying payloads.
func readRecords(t testing.TB, data []byte) ([]written, *Reader) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []written
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return out, r
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		w := written{Kind: rec.Kind}
		switch rec.Kind {
		case KindEvent:
			w.Event = rec.Event
			if rec.Event.Payload != nil {
				w.Event.Payload = append([]byte(nil), rec.Event.Payload...)
			}
		case KindConnection:
			w.Conn = rec.Conn
		case KindMarker:
			w.Marker = rec.Marker
		case KindLost:
			w.Lost = rec.Lost
		}
		out = append(out, w)
	}
}

var testMeta = Meta{
	Version:      "test",
	Host:         "host",
	Kernel:       "6.18",
	Start:        time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	StartMono:    123456789,
	Command:      []string{"venus", "run"},
	PIDs:         []uint32{1, 2},
	Probes:       []string{"sock"},
	Source:       "ebpf",
	PayloadBytes: 64,
	Protocol:     "venus",
	Labels:       map[string]string{"mode": "coalesce"},
}

var fixedNow = func() time.Time { return time.Date(2026, 1, 2, 3, 5, 0, 0, time.UTC) }

// TestRoundTrip is RELIABILITY A6: random records written and read back are equal, in order,
// over chunk boundaries of every size.
func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	sets := 10_000
	if testing.Short() || raceEnabled {
		sets = 1000
	}
	var buf bytes.Buffer
	for i := 0; i < sets; i++ {
		set := randSet(rng)
		buf.Reset()
		opt := &WriterOptions{FlushRecords: 1 + rng.Intn(20), FlushInterval: -1, Now: fixedNow}
		w, err := NewWriter(&buf, testMeta, opt)
		if err != nil {
			t.Fatal(err)
		}
		writeSet(t, w, set)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got, r := readRecords(t, buf.Bytes())
		if len(got) == 0 && len(set) == 0 {
			got = set
		}
		if !reflect.DeepEqual(got, set) {
			for j := range set {
				if j >= len(got) || !reflect.DeepEqual(got[j], set[j]) {
					t.Fatalf("set %d record %d:\n got %+v\nwant %+v", i, j, got[j:min(j+1, len(got))], set[j])
				}
			}
			t.Fatalf("set %d: got %d records, want %d", i, len(got), len(set))
		}
		if !reflect.DeepEqual(r.Meta(), testMeta) {
			t.Fatalf("meta: got %+v want %+v", r.Meta(), testMeta)
		}
		rec := r.Recovery()
		if rec.Damaged() || rec.ChunksBad != 0 || rec.UnknownChunks != 0 {
			t.Fatalf("set %d: clean file reads as damaged: %v", i, rec)
		}
		ft, ok := r.Footer()
		if !ok || int(ft.Chunks)+1 != rec.ChunksRead {
			t.Fatalf("set %d: footer %+v (ok %v), chunks read %d", i, ft, ok, rec.ChunksRead)
		}
	}
}

func TestReadFileMerges(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: 2, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.WriteConnection(&Connection{ID: 7, Family: FamilyTCP, Local: "127.0.0.1:1", Remote: "127.0.0.1:2", FirstSeen: 100, LastSeen: 100}))
	must(w.WriteConnection(&Connection{ID: 9, Family: FamilyUnix, Local: "/tmp/s"}))
	must(w.WriteEvent(&Event{TS: 150, Conn: 7, Dir: DirSend, Op: OpSendto, Bytes: 10, Payload: make([]byte, 300)}))
	must(w.WriteLost("ringbuf", 3))
	must(w.WriteConnection(&Connection{ID: 7, LastSeen: 900, PID: 42}))
	must(w.WriteLost("ringbuf", 5))
	must(w.WriteLost("tracer", 1))
	w.SetStat("probe_ns", 77)
	must(w.Close())
	if err := w.WriteEvent(&Event{}); err != ErrClosed {
		t.Errorf("write after close: %v, want ErrClosed", err)
	}
	f, err := Read(&buf)
	must(err)
	want := []Connection{
		{ID: 7, Family: FamilyTCP, Local: "127.0.0.1:1", Remote: "127.0.0.1:2", PID: 42, FirstSeen: 100, LastSeen: 900},
		{ID: 9, Family: FamilyUnix, Local: "/tmp/s"},
	}
	if !reflect.DeepEqual(f.Connections, want) {
		t.Errorf("connections:\n got %+v\nwant %+v", f.Connections, want)
	}
	if c := f.Conn(7); c == nil || c.LastSeen != 900 {
		t.Errorf("Conn(7) = %+v", c)
	}
	if c := f.Conn(8); c != nil {
		t.Errorf("Conn(8) = %+v, want nil", c)
	}
	if !reflect.DeepEqual(f.Lost, map[string]uint64{"ringbuf": 5, "tracer": 1}) {
		t.Errorf("lost = %v", f.Lost)
	}
	if len(f.Events) != 1 || len(f.Events[0].Payload) != MaxPayload {
		t.Errorf("payload head not cut to MaxPayload: %d", len(f.Events[0].Payload))
	}
	if f.Footer == nil || f.Footer.Events != 1 || f.Footer.Connections != 2 || f.Footer.Stats["probe_ns"] != 77 ||
		f.Footer.Lost["ringbuf"] != 5 || !f.Footer.End.Equal(fixedNow()) {
		t.Errorf("footer = %+v", f.Footer)
	}
	if err := f.CheckValid(); err != nil {
		t.Errorf("CheckValid: %v", err)
	}
	f.Events[0].Conn = 8
	if err := f.CheckValid(); err == nil || !strings.Contains(err.Error(), "connection 8") {
		t.Errorf("CheckValid with a dangling connection: %v", err)
	}
}

// TestTimedFlush checks that an idle writer writes its records within FlushInterval.
func TestTimedFlush(t *testing.T) {
	var mu testutil.SyncBuffer
	w, err := NewWriter(&mu, testMeta, &WriterOptions{FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	before := mu.Len()
	if err := w.WriteEvent(&Event{TS: 1, Bytes: 1}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for mu.Len() == before {
		if time.Now().After(deadline) {
			t.Fatal("no chunk written by the flush timer after 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(mu.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Events) != 1 || f.Footer == nil {
		t.Fatalf("events %d footer %v", len(f.Events), f.Footer)
	}
}

// TestConcurrentWriters writes from several goroutines while the flush timer runs: every record
// arrives, and each goroutine's records keep their order.
func TestConcurrentWriters(t *testing.T) {
	var buf testutil.SyncBuffer
	w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: 50, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const writers, each = 4, 2000
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				var err error
				switch i % 10 {
				case 0:
					err = w.WriteMarker(&Marker{TS: int64(i), TID: uint32(g), Name: "token", Value: int64(i)})
				case 1:
					w.SetStat("n", int64(i))
					err = w.WriteLost("ringbuf", uint64(i))
				default:
					err = w.WriteEvent(&Event{TS: int64(i), TID: uint32(g), Bytes: int64(i), Dir: DirSend})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if i%500 == 0 {
					if err := w.Flush(); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Events) != writers*each*8/10 || len(f.Markers) != writers*each/10 || f.Recovery.Damaged() {
		t.Fatalf("%d events, %d markers, recovery %v", len(f.Events), len(f.Markers), f.Recovery)
	}
	last := map[uint32]int64{}
	for _, e := range f.Events {
		if prev, ok := last[e.TID]; ok && e.TS <= prev {
			t.Fatalf("writer %d: event %d after %d", e.TID, e.TS, prev)
		}
		last[e.TID] = e.TS
	}
}

func TestCheckValid(t *testing.T) {
	base := func() *File {
		return &File{
			Events:      []Event{{TS: 1, Dur: 2, Conn: 7, Bytes: 3}},
			Connections: []Connection{{ID: 7}},
			Markers:     []Marker{{Name: "token"}},
			Footer:      &Footer{Events: 1, Markers: 1},
			Recovery:    Recovery{Clean: true, ChunksRead: 3},
		}
	}
	tests := []struct {
		name  string
		spoil func(f *File)
		want  string // "" = valid
	}{
		{"valid", func(f *File) {}, ""},
		{"connection id 0", func(f *File) { f.Connections = append(f.Connections, Connection{}) }, "id 0"},
		{"connection twice", func(f *File) { f.Connections = append(f.Connections, Connection{ID: 7}) }, "listed twice"},
		{"dangling connection", func(f *File) { f.Events[0].Conn = 8 }, "connection 8 not in the trace"},
		{"no connection is fine", func(f *File) { f.Events[0].Conn = 0 }, ""},
		{"negative duration", func(f *File) { f.Events[0].Dur = -1 }, "negative duration"},
		{"negative bytes", func(f *File) { f.Events[0].Bytes = -1 }, "negative byte count"},
		{"long payload", func(f *File) { f.Events[0].Payload = make([]byte, MaxPayload+1) }, "payload head"},
		{"unnamed marker", func(f *File) { f.Markers[0].Name = "" }, "no name"},
		{"negative marker span", func(f *File) { f.Markers[0].Dur = -5 }, "negative duration"},
		{"footer disagrees", func(f *File) { f.Footer.Events = 2 }, "footer counts 2 events"},
		{"footer of a damaged file is not checked", func(f *File) { f.Footer.Events = 2; f.Recovery.ChunksBad = 1 }, ""},
	}
	for _, tc := range tests {
		f := base()
		tc.spoil(f)
		err := f.CheckValid()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: CheckValid() = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestWriterJSONCaps(t *testing.T) {
	big := testMeta
	big.Labels = map[string]string{"k": strings.Repeat("v", maxJSONBody)}
	if _, err := NewWriter(io.Discard, big, nil); err == nil || !strings.Contains(err.Error(), "encode meta") {
		t.Errorf("NewWriter with a meta over the cap: %v", err)
	}
	w, err := NewWriter(io.Discard, testMeta, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < maxJSONBody/8; i++ {
		w.SetStat("stat"+strings.Repeat("x", 8)+string(rune('a'+i%26))+strconv.Itoa(i), int64(i))
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "encode footer") {
		t.Errorf("Close with a footer over the cap: %v", err)
	}
}
