package analyzers

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
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
// serial round trips finding. Its trace has no token markers, which perflab model needs, so
// the fix does not send the user there (TestSerialFixPointsToModel).
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
			if f.CostUSPerUnit <= 0 || f.Share < 0.5 || strings.Contains(f.Fix, "perflab model") {
				t.Errorf("serial round trips: %+v", f)
			}
			t.Logf("%s: %s; %s", f.Title, f.Evidence, f.Cost)
			return
		}
	}
	t.Errorf("no serial_round_trips finding (%.2f in flight): %+v", s.InFlight.Mean, s.Evidence.Findings)
}

// TestSerialFixPointsToModel: the serial finding names 'perflab model --from TRACE' only for a
// trace the model takes: a token loop (token markers) whose protocol classes its calls as
// submits and sync points (venus). A venus trace without markers, or one of another protocol,
// would be refused or predicted no change.
func TestSerialFixPointsToModel(t *testing.T) {
	path := writeTrace(t, "v.plt", fixtures.Meta("tracer", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 60, Uploads: 4, Source: trace.SourceTracer})
	})
	for _, c := range []struct {
		name, path string
		model      bool
	}{{"venus token loop", path, true}, {"venus frames, no markers", fixturePath(t, "traces/pingpong.plt"), false}} {
		s, err := Analyze(protocol.Files([]string{c.path}, nil), Options{})
		if err != nil {
			t.Fatal(err)
		}
		fix := ""
		if s.Evidence != nil {
			for _, f := range s.Evidence.Findings {
				if f.Kind == "serial_round_trips" {
					fix = f.Fix
				}
			}
		}
		if fix == "" {
			t.Fatalf("%s: no serial round trips finding", c.name)
		}
		if got := strings.Contains(fix, "perflab model --from TRACE --mode pipeline"); got != c.model {
			t.Errorf("%s: fix %q names the model: %v, want %v", c.name, fix, got, c.model)
		}
	}
}
