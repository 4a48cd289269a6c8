package analyzers

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// pipeReport analyzes ins through a pipe of batches of size items (directly when size is 0)
// and returns the Summary as JSON.
func pipeReport(t *testing.T, ins []protocol.Input, size int) string {
	t.Helper()
	a, err := newAnalyzer(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := scanPiped(ins, a.opt.Spec, &sink{a: a}, size); err != nil {
		t.Fatal(err)
	}
	a.finish()
	a.loopFinish()
	b, err := json.Marshal(a.s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPipeSameReport: the analysis on a goroutine of its own (pipe) reports exactly what it
// reports called directly by the scan, on the real traces (messages with command batches,
// replies answering several requests) and on several traces at once, with the pipe's own
// batch size and with a small one (odd, so that batches end after every kind of item) so that
// even the smallest trace crosses many batch boundaries.
func TestPipeSameReport(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(realDir, "*", "*.plt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no real traces under %s: %v", realDir, err)
	}
	sets := [][]string{paths}
	for _, p := range paths {
		sets = append(sets, []string{p})
	}
	for _, set := range sets {
		want := pipeReport(t, protocol.Files(set, nil), 0)
		for _, size := range []int{pipeBatch, 7} {
			if got := pipeReport(t, protocol.Files(set, nil), size); got != want {
				t.Errorf("%v, batches of %d: piped report differs:\n%s\nwant\n%s", set, size, got[:min(len(got), 2000)], want[:min(len(want), 2000)])
			}
		}
	}
}

// TestPipeAnsweredWithMessage: a reply frame that answers several pipelined requests (three
// reply records, as venusd's coalescing server sends them) is followed by an Answered call for
// each request past the first, which needs its message; through batches of every size from 1 to 9
// the report equals the direct one, so no batch ended between a message and its Answered.
func TestPipeAnsweredWithMessage(t *testing.T) {
	var buf bytes.Buffer
	w, err := trace.NewWriter(&buf, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	const frames, perFrame = 40, 3
	ts := fixtures.Base
	conn := &trace.Connection{ID: 1, Family: trace.FamilyTCP, Local: "127.0.0.1:41234", Remote: "127.0.0.1:5556", PID: 10, FirstSeen: ts}
	if err := w.WriteConnection(conn); err != nil {
		t.Fatal(err)
	}
	write := func(ev trace.Event) {
		ev.PID, ev.TID, ev.Conn, ev.Source = 10, 10, 1, trace.SourceEBPF
		ev.Bytes = int64(len(ev.Payload))
		if err := w.WriteEvent(&ev); err != nil {
			t.Fatal(err)
		}
	}
	// Each round: perFrame pipelined request frames, then one reply frame answering them all.
	for i := range frames {
		first := perFrame*i + 1
		for k := range perFrame {
			write(trace.Event{TS: ts, Dur: 1_000, Dir: trace.DirSend, Op: trace.OpSendto,
				Payload: fixtures.Records(fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, uint32(first+k), 1, make([]byte, 8))})
			ts += 2_000
		}
		write(trace.Event{TS: ts, Dur: 30_000, Dir: trace.DirRecv, Op: trace.OpRecvfrom,
			Payload: fixtures.Records(fixtures.CmdWaitForFences, fixtures.FlagReply, uint32(first), perFrame, make([]byte, 4))})
		ts += 40_000
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "coalesced.plt")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ins := func() []protocol.Input { return protocol.Files([]string{path}, nil) }
	want := pipeReport(t, ins(), 0)
	// The direct report has a round trip per request: the Answered calls were made.
	var s Summary
	if err := json.Unmarshal([]byte(want), &s); err != nil {
		t.Fatal(err)
	}
	if s.RoundTrips.Count != frames*perFrame || s.RoundTrips.Unanswered != 0 {
		t.Fatalf("direct report: %d round trips, %d unanswered; want %d, none", s.RoundTrips.Count, s.RoundTrips.Unanswered, frames*perFrame)
	}
	for size := 1; size <= 9; size++ {
		if got := pipeReport(t, ins(), size); got != want {
			t.Errorf("batches of %d: piped report differs:\n%s\nwant\n%s", size, got[:min(len(got), 2000)], want[:min(len(want), 2000)])
		}
	}
}
