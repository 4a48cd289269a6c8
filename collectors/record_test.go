package collectors

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/perflab/perflab/trace"
)

func TestMain(m *testing.M) {
	if runCrashHelper() {
		return
	}
	goleak.VerifyTestMain(m)
}

// synth is a Source that emits two connections and then events, event i on connection
// 1+i%2 with Bytes == i, alternating send and receive, until n events (n < 0: until ctx is
// done). It reports lost events every 1000 events and stats at the end.
type synth struct {
	n       int
	lost    uint64
	emitted int
}

func (s *synth) Run(ctx context.Context, emit func(*trace.Record) error) error {
	for id := uint64(1); id <= 2; id++ {
		c := trace.Record{Kind: trace.KindConnection, Conn: trace.Connection{ID: id, Family: trace.FamilyTCP,
			Local: "127.0.0.1:5556", Remote: fmt.Sprintf("127.0.0.1:%d", 40000+id), PID: 7, FirstSeen: 1, LastSeen: 1}}
		if err := emit(&c); err != nil {
			return err
		}
	}
	payload := []byte("SLPV\x10\x00\x00\x00payload")
	for i := 0; s.n < 0 || i < s.n; i++ {
		if i%256 == 0 && ctx.Err() != nil {
			break
		}
		e := trace.Record{Kind: trace.KindEvent, Event: trace.Event{
			TS: int64(1000 + i), Dur: 500, PID: 7, TID: 8, Conn: uint64(1 + i%2), Dir: trace.Dir(1 + i%2),
			Op: trace.OpWrite, Source: trace.SourceEBPF, Bytes: int64(i), Payload: payload}}
		if i%2 == 1 {
			e.Event.Op = trace.OpRead
		}
		if i%10 == 9 {
			e.Event.Errno, e.Event.Bytes = 11, 0
		}
		if err := emit(&e); err != nil {
			return err
		}
		s.emitted++
		if i%1000 == 999 {
			s.lost += 3
			l := trace.Record{Kind: trace.KindLost, Lost: trace.Lost{Source: "ringbuf", Count: s.lost}}
			if err := emit(&l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *synth) Stats() map[string]int64 {
	return map[string]int64{"probe_events": int64(s.emitted), "probe_ns_per_event": 310, "probe_runs": 1234,
		"probe_ns_per_run": 95, "probe_run_ns": 117230, "probe_stats_events": 400,
		"probe_other_ns_per_call": 41, "probe_other_ns_per_switch": 9}
}

var _ Source = (*synth)(nil)
var _ Stater = (*synth)(nil)

func TestRecordRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	meta := trace.Meta{Version: "test", Source: "ebpf", PayloadBytes: 64}
	w, err := NewTrace(&buf, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	src := &synth{n: 5000}
	tapped := map[trace.Kind]int{}
	res, err := Record(context.Background(), src, w, Options{Tap: func(r *trace.Record) { tapped[r.Kind]++ }})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[trace.Kind]int{trace.KindConnection: 2, trace.KindEvent: 5000, trace.KindLost: 5}; !cmp.Equal(tapped, want) {
		t.Errorf("the tap saw %v, want %v", tapped, want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := trace.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if f.Footer == nil {
		t.Fatal("no footer")
	}
	if len(f.Events) != 5000 || res.Events != 5000 {
		t.Fatalf("file has %d events, result %d, want 5000", len(f.Events), res.Events)
	}
	if got := f.Footer.Stats["probe_ns_per_event"]; got != 310 {
		t.Errorf("footer stat probe_ns_per_event = %d, want 310", got)
	}
	if f.Lost["ringbuf"] != 15 || res.Lost["ringbuf"] != 15 {
		t.Errorf("lost in file %v, in result %v, want ringbuf 15", f.Lost, res.Lost)
	}
	// Counters: event i is a send when i is even and moves i bytes; every tenth is EAGAIN.
	var want Result
	for i := 0; i < 5000; i++ {
		d := &want.Send
		if i%2 == 1 {
			d = &want.Recv
		}
		if i%10 == 9 {
			if d.Errors == nil {
				d.Errors = map[uint32]uint64{}
			}
			d.Errors[11]++
			continue
		}
		if i == 0 { // moved no bytes: not a call, as analyze counts them
			d.Empty++
			continue
		}
		d.Calls++
		d.Bytes += int64(i)
	}
	if diff := cmp.Diff(want.Send, res.Send); diff != "" {
		t.Errorf("send (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.Recv, res.Recv); diff != "" {
		t.Errorf("recv (-want +got):\n%s", diff)
	}
	if len(res.Conns) != 2 || res.Conns[0].Send.Calls != want.Send.Calls || res.Conns[1].Recv.Calls != want.Recv.Calls {
		t.Errorf("per-connection counts %+v", res.Conns)
	}
	if f.Meta.StartMono == 0 || f.Meta.Start.IsZero() {
		t.Errorf("start not stamped: %+v", f.Meta)
	}
}

// TestSummaryCounts: the Result holds what record's summary prints (reports.Record renders it):
// events, lost events per source, calls, bytes and errnos per direction and per connection,
// the calls that moved nothing apart, and the probe's cost.
func TestSummaryCounts(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Record(context.Background(), &synth{n: 1000}, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if res.Events != 1000 || res.LostTotal() != 3 || res.Lost["ringbuf"] != 3 {
		t.Errorf("events %d, lost %v; want 1000 and ringbuf 3", res.Events, res.Lost)
	}
	if s := res.Send; s.Calls != 499 || s.Bytes != 249500 || len(s.Errors) != 0 || s.Empty != 1 {
		t.Errorf("send %+v; want 499 calls, 249500 bytes, no errors, 1 empty", s)
	}
	if r := res.Recv; r.Calls != 400 || r.Bytes != 199600 || r.Errors[11] != 100 || r.Empty != 0 {
		t.Errorf("recv %+v; want 400 calls, 199600 bytes, 100 EAGAIN", r)
	}
	if len(res.Conns) != 2 || res.Conns[0].Send.Calls != 499 || res.Conns[1].Recv.Calls != 400 {
		t.Errorf("connections %+v; want 499 sends on the first, 400 receives on the second", res.Conns)
	}
	if got := res.ProbeCost(); !strings.Contains(got, "310 ns of kernel time per recorded event") {
		t.Errorf("probe cost %q", got)
	}
}

func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The recording stops once two progress lines are out (a slow machine delays them, it does
	// not lose them); the timeout only bounds a broken progress writer.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prog := syncBuffer{stopAfter: 2, stop: cancel}
	if _, err := Record(ctx, &synth{n: -1}, w, Options{Progress: &prog, ProgressEvery: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := strings.Split(strings.TrimSpace(prog.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("want a progress line per period, got %q", prog.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "recording ") || !strings.Contains(l, "events/s") || !strings.Contains(l, "busiest: #") {
			t.Errorf("progress line %q lacks elapsed, rate or busiest connections", l)
		}
	}
}

// faulty fails its nth Write (counting from 1) with err, after writing short bytes of it.
type faulty struct {
	buf   bytes.Buffer
	calls int
	nth   int
	short int
	err   error
}

func (f *faulty) Write(p []byte) (int, error) {
	f.calls++
	if f.calls >= f.nth {
		n := min(f.short, len(p))
		f.buf.Write(p[:n])
		return n, f.err
	}
	return f.buf.Write(p)
}

// TestFaultyWriter (RELIABILITY B4): short writes, ENOSPC and EIO at the Nth write stop the
// recording with one clear error, stop the source, and leave a readable prefix.
func TestFaultyWriter(t *testing.T) {
	faults := []struct {
		name  string
		short int
		err   error
	}{
		{"short", 7, errors.New("short write")},
		{"enospc", 0, syscall.ENOSPC},
		{"eio", 100, syscall.EIO},
	}
	for _, fault := range faults {
		for nth := 1; nth <= 200; nth += 7 {
			fw := &faulty{nth: nth, short: fault.short, err: fault.err}
			w, err := trace.NewWriter(fw, trace.Meta{Version: "test"}, &trace.WriterOptions{FlushRecords: 50, FlushInterval: -1})
			if err != nil {
				if nth != 1 {
					t.Fatalf("%s at %d: header: %v", fault.name, nth, err)
				}
				continue // the header itself failed: nothing was recorded
			}
			src := &synth{n: -1}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = Record(ctx, src, w, Options{})
			cancel()
			if err == nil {
				t.Fatalf("%s at write %d: recording did not fail", fault.name, nth)
			}
			if !errors.Is(err, fault.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s at write %d: error %q is not one line naming the fault", fault.name, nth, err)
			}
			w.Close()
			f, rerr := trace.Read(bytes.NewReader(fw.buf.Bytes()))
			if rerr != nil {
				t.Fatalf("%s at write %d: prefix unreadable: %v", fault.name, nth, rerr)
			}
			// Every complete chunk before the fault is there: write 1 is the header, each
			// later write one chunk of 50 records (2 connections, then events with a lost
			// count after every 1000th).
			records := len(f.Events) + 2 + len(f.Events)/1000
			if want := (nth - 2) * 50; nth > 1 && (records < want-1 || records > want) {
				t.Errorf("%s at write %d: %d records readable, want %d", fault.name, nth, records, want)
			}
			for i, e := range f.Events {
				if e.TS != int64(1000+i) {
					t.Fatalf("%s at write %d: event %d has TS %d: not a prefix", fault.name, nth, i, e.TS)
				}
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// stop, when set, is called once the buffer holds stopAfter lines.
	stopAfter int
	stop      func()
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.stop != nil && bytes.Count(b.buf.Bytes(), []byte("\n")) >= b.stopAfter {
		b.stop()
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestFormatElapsed(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{20 * time.Millisecond, "20 ms"},
		{400 * time.Microsecond, "0.4 ms"},
		{999 * time.Millisecond, "999 ms"},
		{time.Second, "1.0 s"},
		{3140 * time.Millisecond, "3.1 s"},
	} {
		if got := FormatElapsed(tc.d); got != tc.want {
			t.Errorf("FormatElapsed(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// TestProbeCost: the cost line says what was measured, and "unknown" only when the statistics
// could not be enabled, with the reason.
func TestProbeCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   map[string]int64
		want []string
		not  []string
	}{
		{"no probe", map[string]int64{}, nil, []string{"probe cost"}},
		{"measured, all events", map[string]int64{"probe_events": 50, "probe_stats_events": 50, "probe_ns_per_event": 120,
			"probe_other_ns_per_call": 30, "probe_other_ns_per_switch": 8},
			[]string{"120 ns of kernel time per recorded event", "30 ns per socket send or receive", "8 ns per context switch",
				"nothing on their other system calls"}, []string{"measured over", "unknown"}},
		{"measured, sampled", map[string]int64{"probe_events": 5000, "probe_stats_events": 1200, "probe_ns_per_event": 140},
			[]string{"140 ns", "measured over 1200 of the 5000 events"}, []string{"unknown"}},
		{"too few sampled", map[string]int64{"probe_events": 54939, "probe_stats_events": 10, "probe_ns_per_event": 8289},
			[]string{"per recorded event not known: 8289 ns over only 10 of the 54939 events", "too few"}, []string{"of kernel time per recorded event"}},
		{"EPERM", map[string]int64{"probe_events": 10, "probe_stats_errno": 1, "probe_other_ns_per_call": 25},
			[]string{"unknown per recorded event", "refused", "EPERM", "CAP_SYS_ADMIN", "25 ns per socket"}, nil},
		{"no events", map[string]int64{"probe_events": 0, "probe_stats_events": 0},
			[]string{"no event recorded"}, []string{"unknown"}},
		{"none in the windows", map[string]int64{"probe_events": 7, "probe_stats_events": 0},
			[]string{"not measured", "sampled"}, []string{"unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := probeCost(tc.st)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(got, w) {
					t.Errorf("%q has %q", got, w)
				}
			}
			if len(tc.want) == 0 && got != "" {
				t.Errorf("got %q, want nothing", got)
			}
		})
	}
}

// sliceSource emits its records in order.
type sliceSource []trace.Record

func (s sliceSource) Run(ctx context.Context, emit func(*trace.Record) error) error {
	for i := range s {
		if err := emit(&s[i]); err != nil {
			return err
		}
	}
	return nil
}

// TLS plaintext calls are counted apart: the same connection's system calls carry them.
func TestSummaryTLS(t *testing.T) {
	ev := func(op trace.Op, dir trace.Dir, n int64) trace.Record {
		return trace.Record{Kind: trace.KindEvent, Event: trace.Event{TS: 1, PID: 7, Conn: 1, Dir: dir, Op: op, Source: trace.SourceEBPF, Bytes: n}}
	}
	src := sliceSource{
		{Kind: trace.KindConnection, Conn: trace.Connection{ID: 1, Family: trace.FamilyTCP, PID: 7}},
		ev(trace.OpSendto, trace.DirSend, 115), ev(trace.OpTLSWrite, trace.DirSend, 86),
		ev(trace.OpRecvfrom, trace.DirRecv, 5), ev(trace.OpRecvfrom, trace.DirRecv, 176), ev(trace.OpTLSRead, trace.DirRecv, 152),
	}
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, trace.Meta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Record(context.Background(), src, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if res.Send.Calls != 1 || res.Recv.Calls != 2 || res.Recv.Bytes != 181 || res.Conns[0].Send.Calls != 1 || res.Conns[0].Recv.Calls != 2 {
		t.Errorf("system calls: send %+v, recv %+v, connection %+v", res.Send, res.Recv, res.Conns[0])
	}
	if res.TLSSend.Calls != 1 || res.TLSSend.Bytes != 86 || res.TLSRecv.Calls != 1 || res.TLSRecv.Bytes != 152 {
		t.Errorf("plaintext: send %+v, recv %+v", res.TLSSend, res.TLSRecv)
	}
}
