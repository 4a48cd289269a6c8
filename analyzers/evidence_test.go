package analyzers

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/protocol"
)

// TestEvidenceRealLlamaSplitWrites: llama.cpp's RPC client writes each message as the command
// byte, the size and the payload, three send calls (fixtures/real/llamacpp/README: the client
// is recorded with perflab record). The finding names it and counts the calls writev would
// save per token: two per request, eight requests per token in the steady state.
func TestEvidenceRealLlamaSplitWrites(t *testing.T) {
	for _, variant := range []string{"default", "fitoff"} {
		t.Run(variant, func(t *testing.T) {
			s, err := Analyze(protocol.Files([]string{filepath.Join(realDir, "llamacpp", "client-"+variant+".plt")}, nil), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Evidence == nil {
				t.Fatal("no evidence")
			}
			var found bool
			for _, f := range s.Evidence.Findings {
				if f.Kind != "split_writes" {
					continue
				}
				found = true
				var steady *UnitStats
				for i := range s.Units {
					if s.Units[i].Shape == "steady" {
						steady = &s.Units[i]
					}
				}
				if steady == nil || f.Unit != "token" {
					t.Fatalf("finding per %q, units %+v", f.Unit, s.Units)
				}
				if want := 2 * steady.RequestsPerUnit; f.CallsPerUnit < want-0.1 || f.CallsPerUnit > want+0.1 {
					t.Errorf("%.2f calls per token saved, want %.2f (2 per request, %.2f requests per token)", f.CallsPerUnit, want, steady.RequestsPerUnit)
				}
				t.Logf("%s: %s; %s", f.Title, f.Evidence, f.Cost)
			}
			if !found {
				t.Errorf("no split_writes finding: %+v", s.Evidence.Findings)
			}
			if a := s.Evidence.Attribution; a == nil || a.RoundTrips != s.RoundTrips.Client || a.SchedKnown {
				t.Errorf("attribution %+v for %d client round trips without scheduler evidence", a, s.RoundTrips.Client)
			}
		})
	}
}

// TestEvidenceRealVenusSerial: the real Venus Plus client on lavapipe (fixtures/real/venusplus)
// makes its round trips one at a time, and most of its time goes to waiting for replies: the
// serial round trips finding, pointing at the pipelining what-if.
func TestEvidenceRealVenusSerial(t *testing.T) {
	s, err := Analyze(protocol.Files([]string{filepath.Join(realDir, "venusplus", "client-phase9.plt")}, nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Evidence == nil {
		t.Fatal("no evidence")
	}
	for _, f := range s.Evidence.Findings {
		if f.Kind == "serial_round_trips" {
			if f.CostUSPerUnit <= 0 || f.Share < 0.5 || !strings.Contains(f.Fix, "--mode pipeline") {
				t.Errorf("serial round trips: %+v", f)
			}
			t.Logf("%s: %s; %s", f.Title, f.Evidence, f.Cost)
			return
		}
	}
	t.Errorf("no serial_round_trips finding (%.2f in flight): %+v", s.InFlight.Mean, s.Evidence.Findings)
}
