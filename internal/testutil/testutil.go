// Package testutil holds helpers shared by perflab's tests: privilege skips that turn into
// failures on CI, and golden files with an -update flag.
package testutil

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/ with the output of this run")

// Update reports whether the test run was given -update.
func Update() bool { return *update }

// RequireBPF skips t with reason when eBPF is unusable here, or fails it when the environment
// sets PERFLAB_REQUIRE_BPF=1 (CI), so that a test that never runs cannot look green.
func RequireBPF(t testing.TB, usable bool, reason string) {
	t.Helper()
	if usable {
		return
	}
	if os.Getenv("PERFLAB_REQUIRE_BPF") == "1" {
		t.Fatalf("eBPF required (PERFLAB_REQUIRE_BPF=1) but unusable: %s", reason)
	}
	t.Skipf("eBPF unusable: %s (set PERFLAB_REQUIRE_BPF=1 to fail instead)", reason)
}

// Golden compares got with the file testdata/NAME. With -update it rewrites the file. On a
// mismatch it writes testdata/NAME.got (ignored by git) for diffing.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run with -update to create it)", path, err)
	}
	if !bytes.Equal(want, got) {
		_ = os.WriteFile(path+".got", got, 0o644)
		t.Errorf("%s differs from the golden file; see %s.got (run with -update to accept)", path, path)
	}
}

// SyncBuffer is a bytes.Buffer safe for a writer in one goroutine (a verb, a command's output
// copier, a trace writer's timer) while the test reads it in another.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns a copy of what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len is how many bytes were written so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Bytes returns a copy of what was written so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}
