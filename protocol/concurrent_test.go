package protocol

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

// TestManyConcurrentConnections: more connections with a request in flight at once than auto
// detection keeps decoding state for (maxLiveConns) still pair every reply with its request:
// a connection waiting for its reply is not retired from under it.
func TestManyConcurrentConnections(t *testing.T) {
	for _, heads := range []bool{true, false} { // venus frames, or raw bursts without heads
		t.Run(strconv.FormatBool(heads), func(t *testing.T) { manyConcurrent(t, heads) })
	}
}

func manyConcurrent(t *testing.T, heads bool) {
	n := maxLiveConns + 1000
	path := filepath.Join(t.TempDir(), "concurrent.plt")
	w, err := trace.Create(path, fixtures.Meta("ebpf", "venus"), fixtures.Options())
	if err != nil {
		t.Fatal(err)
	}
	ts := fixtures.Base
	for i := 0; i < n; i++ { // every client sends its request...
		id := uint64(i + 1)
		pid := uint32(1000 + i%50)
		c := &trace.Connection{ID: id, Family: trace.FamilyTCP, Local: "127.0.0.1:" + strconv.Itoa(10000+i), Remote: "127.0.0.1:5556", PID: pid, FirstSeen: ts}
		if err := w.WriteConnection(c); err != nil {
			t.Fatal(err)
		}
		req := trace.Event{TS: ts, Dur: 2000, PID: pid, TID: pid, Conn: id, Dir: trace.DirSend, Op: trace.OpSendto, Source: trace.SourceEBPF,
			Bytes: fixtures.FrameHeaderSize + 16, Payload: fixtures.Frame(16, fixtures.CmdWaitForFences, fixtures.FlagReplyWanted, 16)}
		if !heads {
			req.Payload = nil
		}
		if err := w.WriteEvent(&req); err != nil {
			t.Fatal(err)
		}
		ts += 1000
	}
	for i := 0; i < n; i++ { // ...then every reply comes
		id := uint64(i + 1)
		pid := uint32(1000 + i%50)
		rep := trace.Event{TS: ts, Dur: 2000, PID: pid, TID: pid, Conn: id, Dir: trace.DirRecv, Op: trace.OpRecvfrom, Source: trace.SourceEBPF,
			Bytes: fixtures.FrameHeaderSize + 16, Payload: fixtures.Frame(16, fixtures.CmdWaitForFences, 0, 16)}
		if !heads {
			rep.Payload = nil
		}
		if err := w.WriteEvent(&rep); err != nil {
			t.Fatal(err)
		}
		ts += 1000
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var reqs, replies, paired int
	err = Messages(Files([]string{path}, nil), nil, func(m *Message) error {
		if m.IsReply {
			replies++
			if m.ReqTS > 0 {
				paired++
			}
		} else {
			reqs++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if reqs != n || replies != n || paired != n {
		t.Errorf("%d requests, %d replies, %d paired; want %d of each", reqs, replies, paired, n)
	}
}
