package analyzers

import (
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// TestResumedConnectionCountsOnce: in a trace of more connections than auto detection keeps
// live, the first one, idle while 5,000 others carry data, comes back speaking RESP where it
// spoke venus: the protocol shares count it once, as venus, and a warning says how it was
// decoded when it came back.
func TestResumedConnectionCountsOnce(t *testing.T) {
	const n = 5000
	path := writeTrace(t, "resumed.plt", fixtures.Meta("ebpf", ""), func(w *trace.Writer) error {
		ts := fixtures.Base
		ev := func(id uint64, dir trace.Dir, size int64, p []byte) error {
			e := trace.Event{TS: ts, Dur: 2000, PID: 4000, TID: 4000, Conn: id, Dir: dir, Op: trace.OpSendto,
				Source: trace.SourceEBPF, Bytes: size, Payload: p}
			ts += 3000
			return w.WriteEvent(&e)
		}
		for i := range n {
			id := uint64(i + 1)
			if err := w.WriteConnection(&trace.Connection{ID: id, Family: trace.FamilyTCP, Local: "127.0.0.1:5556", Remote: "127.0.0.1:40000", PID: 4000}); err != nil {
				return err
			}
			if err := ev(id, trace.DirSend, fixtures.FrameHeaderSize+16, fixtures.Frame(16, fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, 16)); err != nil {
				return err
			}
			if err := ev(id, trace.DirRecv, fixtures.FrameHeaderSize+16, fixtures.Frame(16, fixtures.CmdWaitForFences, 0, 16)); err != nil {
				return err
			}
		}
		req, rep := []byte("*1\r\n$4\r\nPING\r\n"), []byte("+PONG\r\n")
		if err := ev(1, trace.DirSend, int64(len(req)), req); err != nil {
			return err
		}
		return ev(1, trace.DirRecv, int64(len(rep)), rep)
	})
	_, a := summaryJSON(t, []string{path}, Options{})
	conns := map[string]int{}
	total := 0
	if a.s.Decoding == nil {
		t.Fatal("no decoding figures")
	}
	for _, p := range a.s.Decoding.Protocols {
		conns[p.Name] = p.Connections
		total += p.Connections
	}
	if conns["venus"] != n || total != n {
		t.Errorf("connections by protocol %v, %d in all; want %d, all venus", conns, total, n)
	}
	found := false
	for _, w := range a.s.Warnings {
		found = found || strings.Contains(w, "connection 1 (pid 4000) was retired while idle as venus and, carrying data again, decoded as resp")
	}
	if !found {
		t.Errorf("no warning on connection 1 in %q", a.s.Warnings)
	}
}
