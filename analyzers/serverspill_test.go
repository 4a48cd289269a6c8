package analyzers

import (
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// writeClientServer writes n round trips of a venus client (pid 100, connection 1) and the
// server it talks to (pid 200, connection 2), both traced with eBPF in one trace: every other
// round trip the client first sends a vkQueueSubmit wanting no reply; then it sends a
// vkWaitForFences wanting one, the server's receive call waits for it and reads it, the server
// works for 10 to 30 µs and sends the reply the client's receive call was blocked on.
func writeClientServer(w *trace.Writer, n int) error {
	head := func(cmd, flags uint32) []byte {
		p := make([]byte, 16)
		binary.LittleEndian.PutUint32(p[0:], fixtures.FrameMagic)
		binary.LittleEndian.PutUint32(p[4:], 16)
		binary.LittleEndian.PutUint32(p[8:], cmd)
		binary.LittleEndian.PutUint32(p[12:], flags)
		return p
	}
	submit, wait, reply := head(fixtures.CmdQueueSubmit, 0), head(fixtures.CmdWaitForFences, fixtures.FlagReplyWanted), head(fixtures.CmdWaitForFences, 0)
	cli := &trace.Connection{ID: 1, Family: trace.FamilyTCP, Local: "127.0.0.1:41234", Remote: "127.0.0.1:5556", PID: 100}
	srv := &trace.Connection{ID: 2, Family: trace.FamilyTCP, Local: "127.0.0.1:5556", Remote: "127.0.0.1:41234", PID: 200}
	for _, c := range []*trace.Connection{cli, srv} {
		if err := w.WriteConnection(c); err != nil {
			return err
		}
	}
	ev := func(ts, dur int64, pid uint32, conn uint64, dir trace.Dir, p []byte) error {
		op := trace.OpSendto
		if dir == trace.DirRecv {
			op = trace.OpRecvfrom
		}
		return w.WriteEvent(&trace.Event{TS: ts, Dur: dur, PID: pid, TID: pid, Conn: conn, Dir: dir, Op: op,
			Source: trace.SourceEBPF, Bytes: 24, Payload: p})
	}
	ts, srvIdle := int64(1e9), int64(1e9) // the server waits in receive from srvIdle
	for i := range n {
		work := int64(10_000 + (i*7919)%20_000)
		if i%2 == 0 {
			if err := ev(ts, 2000, 100, 1, trace.DirSend, submit); err != nil {
				return fmt.Errorf("write round trip %d: %w", i, err)
			}
			if err := ev(srvIdle, ts+3000-srvIdle, 200, 2, trace.DirRecv, submit); err != nil {
				return fmt.Errorf("write round trip %d: %w", i, err)
			}
			ts += 3000
			srvIdle = ts + 1000
		}
		for _, err := range []error{
			ev(ts, 2000, 100, 1, trace.DirSend, wait),
			ev(srvIdle, ts+3000-srvIdle, 200, 2, trace.DirRecv, wait),
			ev(ts+3000+work, 2000, 200, 2, trace.DirSend, reply),
			ev(ts+2000, 4000+work, 100, 1, trace.DirRecv, reply),
		} {
			if err != nil {
				return fmt.Errorf("write round trip %d: %w", i, err)
			}
		}
		srvIdle = ts + 5000 + work
		ts += 8000 + work
	}
	return nil
}

// TestServerShareOnePass checks that past the record budget, the traced server's share of the
// waits of units cut by commands is found in a bounded number of passes over the temporary
// files, not one per unit, and that the figures are those of the analysis without a budget.
func TestServerShareOnePass(t *testing.T) {
	path := writeTrace(t, "client-server.plt", fixtures.Meta("ebpf", "venus"), func(w *trace.Writer) error {
		return writeClientServer(w, 3000)
	})
	opt := Options{UnitCommands: "vkWaitForFences", RecordMemory: -1}
	want, _ := summaryJSON(t, []string{path}, opt)
	opt.RecordMemory = 1
	got, a := summaryJSON(t, []string{path}, opt)
	if got != want {
		t.Errorf("record memory 1 B: Summary differs from the unbounded one\n%s", firstDiff(got, want))
	}
	if len(a.s.Units) == 0 || a.s.Units[0].ServerTimeUS == 0 {
		t.Fatalf("no server time in the units: %+v", a.s.Units)
	}
	if a.budget.spilled == 0 {
		t.Fatal("nothing spilled")
	}
	if p := a.blocks.passes + a.srvRecv.passes; p > 8 {
		t.Errorf("%d passes over the spilled blocked and receive intervals for %d units, want a bounded number", p, a.s.Units[0].Count)
	}
}

// clientServerTrace returns the path of writeClientServer's trace of n round trips in
// $TMPDIR, perflab-bench-client-server-N.plt, written unless it is there (it stays, for
// perflab analyze to be timed on it).
func clientServerTrace(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("perflab-bench-client-server-%d.plt", n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	w, err := trace.Create(path+".tmp", fixtures.Meta("ebpf", "venus"), &trace.WriterOptions{FlushInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	if err := writeClientServer(w, n); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkServerShareSpilled analyzes a trace of a client and its server both traced
// (writeClientServer) of PERFLAB_BENCH_ROUND_TRIPS round trips (comma-separated; default
// 20,000 and 40,000), units cut by vkWaitForFences, with 1 MiB of records in memory, so that
// the blocked and receive intervals go to the temporary files. The trace stays in $TMPDIR
// (clientServerTrace).
func BenchmarkServerShareSpilled(b *testing.B) {
	sizes := []int{20_000, 40_000}
	if v := os.Getenv("PERFLAB_BENCH_ROUND_TRIPS"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("PERFLAB_BENCH_ROUND_TRIPS: %q is not a count", f)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run("round-trips="+strconv.Itoa(n), func(b *testing.B) {
			path := clientServerTrace(b, n)
			b.ResetTimer()
			for range b.N {
				a, err := analyze(protocol.Files([]string{path}, nil), Options{UnitCommands: "vkWaitForFences", RecordMemory: 1 << 20}, nil)
				if err != nil {
					b.Fatal(err)
				}
				if a.budget.spilled == 0 || len(a.s.Units) == 0 || a.s.Units[0].ServerTimeUS == 0 {
					b.Fatalf("spilled %d, units %+v", a.budget.spilled, a.s.Units)
				}
			}
		})
	}
}

// TestServerTimesSpilled checks the server's time in spans found past the budget (the
// intervals sorted outside memory, in runs of 5 merged 3 at a time, so that merges take
// several rounds) against the set made in memory (serverBusy) and a pass per span
// (serverTimeScan), on random overlapping blocked and receive intervals in random order.
func TestServerTimesSpilled(t *testing.T) {
	oldLen, oldFan := runLen, runFanIn
	defer func() { runLen, runFanIn = oldLen, oldFan }()
	rng := rand.New(rand.NewSource(5))
	nSpilled := 0
	for round := range 150 {
		runLen, runFanIn = 1+rng.Intn(40), 2+rng.Intn(4)
		mem, disk := &analyzer{}, &analyzer{}
		mb, db := &recBudget{limit: -1}, &recBudget{limit: 1}
		mem.blocks.budget, mem.srvRecv.budget = mb, mb
		disk.blocks.budget, disk.srvRecv.budget = db, db
		add := func(l func(*analyzer) *spillList[interval], iv interval) {
			l(mem).add(iv)
			l(disk).add(iv)
		}
		blocks := func(a *analyzer) *spillList[interval] { return &a.blocks }
		recv := func(a *analyzer) *spillList[interval] { return &a.srvRecv }
		for range rng.Intn(600) {
			from := int64(rng.Intn(5000))
			add(blocks, interval{from, from + int64(rng.Intn(100)) - 5}) // some empty
		}
		for range 1 + rng.Intn(600) {
			from := int64(rng.Intn(5000))
			add(recv, interval{from, from + int64(1+rng.Intn(60))})
		}
		spans := make([]interval, 1+rng.Intn(80))
		for k := range spans {
			from := int64(rng.Intn(5400)) - 200
			spans[k] = interval{from, from + int64(rng.Intn(1500)) - 100}
		}
		got, want := disk.serverTimes(spans), mem.serverTimes(spans)
		spilled := disk.blocks.nFile > 0 || disk.srvRecv.nFile > 0
		if spilled != (disk.busy == nil) || mem.busy == nil {
			t.Fatalf("round %d: spilled %v, set made past the budget %v, within it %v", round, spilled, disk.busy != nil, mem.busy != nil)
		}
		if spilled {
			nSpilled++
		}
		if db.err != nil || db.readErr != nil {
			t.Fatal(db.err, db.readErr)
		}
		for k, s := range spans {
			scan := int64(0)
			if s.to > s.from {
				scan = mem.serverTimeScan(s.from, s.to)
			}
			if got[k] != want[k] || want[k] != scan {
				t.Fatalf("round %d (runs of %d, %d at a time), span %d [%d, %d): %d past the budget, %d from the set, %d by a pass",
					round, runLen, runFanIn, k, s.from, s.to, got[k], want[k], scan)
			}
		}
		if disk.blocks.nFile > 0 && disk.blocks.passes != 1 {
			t.Fatalf("round %d: %d passes over the spilled blocked intervals, want 1", round, disk.blocks.passes)
		}
		disk.blocks.reset()
		disk.srvRecv.reset()
	}
	if nSpilled < 50 {
		t.Fatalf("only %d rounds of 150 spilled", nSpilled)
	}
}
