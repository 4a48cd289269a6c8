package trace

import (
	"testing"
)

func TestEvidencePayloadRoundTrip(t *testing.T) {
	s := SchedInfo{CPU: 3, Flags: SchedIdle | SchedNew, Waker: 4242}
	b := AppendSchedInfo(nil, s)
	if len(b) != SchedInfoSize {
		t.Fatalf("sched info is %d bytes, want %d", len(b), SchedInfoSize)
	}
	if got, err := DecodeSchedInfo(b); err != nil || got != s {
		t.Errorf("sched info %+v, %v; want %+v", got, err, s)
	}
	ti := TCPInfo{OldState: TCPSynSent, State: TCPEstablished, SRTTus: 51, Cwnd: 10, SndWnd: 65535, RcvWnd: 65483,
		TotalRetrans: 2, LostOut: 1, RetransOut: 1, MSS: 32741, BytesAcked: 1 << 40, BytesReceived: 12345,
		LPort: 5556, RPort: 40000, SegsOut: 99}
	b = AppendTCPInfo(nil, ti)
	if len(b) != TCPInfoSize {
		t.Fatalf("tcp info is %d bytes, want %d", len(b), TCPInfoSize)
	}
	if got, err := DecodeTCPInfo(b); err != nil || got != ti {
		t.Errorf("tcp info %+v, %v; want %+v", got, err, ti)
	}
	for _, n := range []int{0, 1, SchedInfoSize - 1} {
		if _, err := DecodeSchedInfo(make([]byte, n)); err == nil {
			t.Errorf("a %d-byte sched payload decoded", n)
		}
	}
	if _, err := DecodeTCPInfo(make([]byte, TCPInfoSize-1)); err == nil {
		t.Error("a short tcp payload decoded")
	}
	if TCPStateName(TCPTimeWait) != "TIME_WAIT" || TCPStateName(200) != "state 200" {
		t.Errorf("state names %q %q", TCPStateName(TCPTimeWait), TCPStateName(200))
	}
	if !OpRunnable.IsEvidence() || OpWrite.IsEvidence() || OpRunnable.String() != "runnable" || OpTCPInfo.String() != "tcp_info" {
		t.Error("evidence ops misnamed")
	}
}

// FuzzEvidencePayload: the evidence payload decoders take any bytes a trace holds.
func FuzzEvidencePayload(f *testing.F) {
	f.Add(AppendSchedInfo(nil, SchedInfo{CPU: 1, Flags: SchedIdle, Waker: 7}))
	f.Add(AppendTCPInfo(nil, TCPInfo{State: TCPEstablished, SRTTus: 40}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := DecodeSchedInfo(b); err == nil {
			got := AppendSchedInfo(nil, s)
			if string(got[:3]) != string(b[:3]) || string(got[4:]) != string(b[4:SchedInfoSize]) { // byte 3 is padding
				t.Fatalf("sched info did not round-trip: %x -> %x", b[:SchedInfoSize], got)
			}
		}
		if ti, err := DecodeTCPInfo(b); err == nil {
			if got := AppendTCPInfo(nil, ti); string(got) != string(b[:TCPInfoSize]) {
				t.Fatalf("tcp info did not round-trip: %x -> %x", b[:TCPInfoSize], got)
			}
		}
	})
}
