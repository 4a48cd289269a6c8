package lab

import (
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/trace"
)

// TestPointDelays writes the trace of two depth-1 clients (process 10, threads 11 and 12) and a
// server (process 20, thread 21 reading both connections) and checks that each server connection
// is paired with the client connection that sent its requests, and that each message's delay
// is its reading thread's runnable time from the message's arrival (its wake-up by the sender,
// else the send's end) to the end of the read, the client's split by whether its CPU was idle.
func TestPointDelays(t *testing.T) {
	const us = int64(1000)
	type call struct {
		conn uint64
		pid  uint32
		tid  uint32
		dir  trace.Dir
		at   int64 // µs
	}
	type run struct {
		pid, tid uint32
		from, to int64 // µs
		waker    uint32
		idle     bool
	}
	tests := []struct {
		name   string
		calls  []call
		runs   []run
		paired uint64
		sumUS  int64
		// the replies: paired, and their delays on an idle CPU and behind other threads
		replies        uint64
		idleUS, busyUS int64
		unmatched      bool
	}{
		{
			name: "woken by each request",
			calls: []call{
				// round trip 1 of client A (conn 1 ↔ server conn 3)
				{1, 10, 11, trace.DirSend, 100}, {3, 20, 21, trace.DirRecv, 130}, {3, 20, 21, trace.DirSend, 140}, {1, 10, 11, trace.DirRecv, 150},
				// round trip 1 of client B (conn 2 ↔ server conn 4), later
				{2, 10, 12, trace.DirSend, 400}, {4, 20, 21, trace.DirRecv, 420}, {4, 20, 21, trace.DirSend, 425}, {2, 10, 12, trace.DirRecv, 440},
				// round trip 2 of A
				{1, 10, 11, trace.DirSend, 700}, {3, 20, 21, trace.DirRecv, 760}, {3, 20, 21, trace.DirSend, 770}, {1, 10, 11, trace.DirRecv, 790},
			},
			runs: []run{
				{20, 21, 98, 125, 10, false},  // woken by A during its send (seen ending at 100): 27 µs
				{20, 21, 401, 415, 10, false}, // woken by B: 14 µs
				{20, 21, 705, 750, 0, false},  // preempted after A's second send ended: 45 µs
				{10, 11, 141, 148, 20, true},  // A's reader, woken on an idle CPU after the reply's send ended (140): 7 µs
				{10, 12, 420, 438, 20, false}, // B's reader, woken by the server during its reply's send: 18 µs
				{10, 11, 200, 300, 0, false},  // A's reader, runnable between its round trips: none of theirs
			},
			paired:  3,
			sumUS:   27 + 14 + 45,
			replies: 3,
			idleUS:  7,
			busyUS:  18,
		},
		{
			name: "a read before the send could have started pairs nothing",
			calls: []call{
				{1, 10, 11, trace.DirSend, 100}, {1, 10, 11, trace.DirRecv, 150},
				{1, 10, 11, trace.DirSend, 700}, {1, 10, 11, trace.DirRecv, 790},
				// the server's second read ends before the client had its first reply
				{3, 20, 21, trace.DirRecv, 130}, {3, 20, 21, trace.DirSend, 140}, {3, 20, 21, trace.DirRecv, 145}, {3, 20, 21, trace.DirSend, 146},
			},
			unmatched: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ev.plt")
			w, err := trace.Create(path, trace.Meta{Source: "ebpf"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[uint64]bool{}
			for _, c := range tc.calls {
				if !seen[c.conn] {
					seen[c.conn] = true
					if err := w.WriteConnection(&trace.Connection{ID: c.conn, Family: trace.FamilyUnix, PID: c.pid}); err != nil {
						t.Fatal(err)
					}
				}
				op := trace.OpRead
				if c.dir == trace.DirSend {
					op = trace.OpWrite
				}
				if err := w.WriteEvent(&trace.Event{TS: c.at * us, PID: c.pid, TID: c.tid, Conn: c.conn, Dir: c.dir, Op: op, Bytes: 72, Source: trace.SourceEBPF}); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range tc.runs {
				si := trace.SchedInfo{Waker: r.waker}
				if r.idle {
					si.Flags = trace.SchedIdle
				}
				e := trace.Event{TS: r.from * us, Dur: (r.to - r.from) * us, PID: r.pid, TID: r.tid, Op: trace.OpRunnable, Source: trace.SourceEBPF,
					Payload: trace.AppendSchedInfo(nil, si)}
				if err := w.WriteEvent(&e); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			d, err := pointDelays(path, 10, 20)
			if err != nil {
				t.Fatal(err)
			}
			n, sum := d.Requests, d.ServerNs
			if tc.unmatched {
				if n != 0 {
					t.Errorf("paired %d requests of connections whose times do not line up", n)
				}
				return
			}
			if n != tc.paired || sum != tc.sumUS*us {
				t.Errorf("paired %d requests with %d ns of delay, want %d with %d µs", n, sum, tc.paired, tc.sumUS)
			}
			if d.Replies != tc.replies || d.ClientIdleNs != tc.idleUS*us || d.ClientBusyNs != tc.busyUS*us {
				t.Errorf("paired %d replies with %d ns idle and %d ns busy, want %d with %d and %d µs", d.Replies, d.ClientIdleNs, d.ClientBusyNs, tc.replies, tc.idleUS, tc.busyUS)
			}
		})
	}
}
