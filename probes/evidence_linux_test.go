//go:build linux && amd64

package probes

import (
	"testing"

	"github.com/perflab/perflab/trace"
)

// TestEvidence records the TCP echo helper with every evidence part on: the messages are still
// counted exactly, the recorded threads' run-queue waits are there (of the helper only, each
// with its CPU), both ends of the connection show their set-up and close with the kernel's TCP
// state, and the footer stats give the evidence's counts and cost.
func TestEvidence(t *testing.T) {
	p := requireProbes(t, Config{Evidence: EvidenceAll})
	rec, c := recordHelper(t, p, "echo-tcp", "3000")
	ty := count(t, rec, c.PID)
	checkTotals(t, ty, c, rec)
	var runnable, woken, snaps int
	states := map[[2]uint8]int{}
	for _, e := range rec.events {
		switch e.Op {
		case trace.OpRunnable:
			runnable++
			si, err := trace.DecodeSchedInfo(e.Payload)
			if err != nil {
				t.Fatalf("runnable event payload %x: %v", e.Payload, err)
			}
			if e.Dur < 0 || e.TID == 0 {
				t.Errorf("runnable event %+v", e)
			}
			if si.Flags&trace.SchedPreempted == 0 {
				woken++
			}
		case trace.OpTCPState, trace.OpTCPInfo, trace.OpTCPRetransmit:
			ti, err := trace.DecodeTCPInfo(e.Payload)
			if err != nil {
				t.Fatalf("tcp event payload %x: %v", e.Payload, err)
			}
			if conn, ok := rec.conns[e.Conn]; !ok || conn.Family != trace.FamilyTCP {
				t.Errorf("tcp event on connection %d: %+v", e.Conn, conn)
			}
			if e.Op == trace.OpTCPState {
				states[[2]uint8{ti.OldState, ti.State}]++
			}
			if e.Op == trace.OpTCPInfo {
				snaps++
				if ti.SRTTus == 0 || ti.Cwnd == 0 || ti.MSS == 0 {
					t.Errorf("snapshot without srtt, cwnd or mss: %+v", ti)
				}
			}
		}
	}
	t.Logf("%d runnable (%d woken), %d snapshots, states %v", runnable, woken, snaps, states)
	// Every round trip blocks the reading goroutine's thread at least now and then.
	if woken == 0 {
		t.Error("no wake-up of a recorded thread")
	}
	if snaps == 0 {
		t.Error("no TCP snapshot")
	}
	// The client connects (CLOSE -> SYN_SENT -> ESTABLISHED), the server's accepted end is
	// established, and both ends close.
	for _, want := range [][2]uint8{{trace.TCPClose, trace.TCPSynSent}, {trace.TCPSynSent, trace.TCPEstablished},
		{trace.TCPClose, trace.TCPListen}, {trace.TCPEstablished, trace.TCPFinWait1}} {
		if states[want] == 0 {
			t.Errorf("no %s -> %s transition", trace.TCPStateName(want[0]), trace.TCPStateName(want[1]))
		}
	}
	st := p.Stats()
	if st["evidence_sched_records"] != int64(runnable) && st["evidence_lost_records"] == 0 {
		t.Errorf("evidence_sched_records %d, recorded %d runnable events", st["evidence_sched_records"], runnable)
	}
	if st["evidence_parts"] != int64(EvidenceAll) {
		t.Errorf("evidence_parts %d", st["evidence_parts"])
	}
	t.Logf("stats: %v", st)
}

// TestEvidenceOff: without evidence the evidence programs are not attached.
func TestEvidenceOff(t *testing.T) {
	p := requireProbes(t, Config{})
	for _, h := range p.Probes() {
		if h == "tp_btf/sched_wakeup" || h == "tp_btf/inet_sock_set_state" {
			t.Errorf("hook %s attached with evidence off", h)
		}
	}
	if p.ev != nil {
		t.Error("evidence object loaded with evidence off")
	}
}
