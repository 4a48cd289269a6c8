package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/export"
)

// TestExportParquet writes the tables of two traces into a new directory, and refuses what it
// cannot do with one line and exit 2.
func TestExportParquet(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "tables")
	second := filepath.Join(dir, "second.plt")
	b, err := os.ReadFile(pingpongTrace)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(second, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "export", "--format", "parquet", "-o", out, "--label", "mode=baseline", pingpongTrace, second)
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, name := range export.ParquetTables {
		st, err := os.Stat(filepath.Join(out, name, "part-00000.parquet"))
		if err != nil || st.Size() < 100 {
			t.Fatalf("%s.parquet: %v", name, err)
		}
	}
	bad := filepath.Join(dir, "bad.plt")
	if err := os.WriteFile(bad, []byte("PLTRACE\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--format", "parquet", pingpongTrace}, "-o DIR is required"},
		{[]string{"export", "--format", "parquet", "-o", out}, "at least one trace"},
		{[]string{"export", "--format", "parquet", "-o", pingpongTrace, pingpongTrace}, "not a directory"},
		{[]string{"export", "--format", "parquet", "-o", filepath.Join(dir, "t2"), pingpongTrace, bad}, "read " + bad},
		{[]string{"export", "--format", "parquet", "--protocol", "nope", "-o", out, pingpongTrace}, "--protocol"},
		{[]string{"export", "--format", "jsonl", "--label", "a=b", pingpongTrace}, "apply to --format parquet only"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
			t.Errorf("perflab %v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "t2", "events")); err == nil {
		t.Error("a bad trace left events/ behind")
	}
}

// TestExportPerfettoProto writes Perfetto's protobuf trace to a file and refuses a bad trace
// with one line and exit 2, leaving no file.
func TestExportPerfettoProto(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run.perfetto-trace")
	code, stdout, stderr := runCLI(t, "export", "--format", "perfetto-proto", "-o", out, pingpongTrace)
	if code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) < 1000 || b[0] != 0x0a { // field 1 (Trace.packet), length-delimited
		t.Fatalf("%d bytes, first %x: %v", len(b), b[:min(len(b), 1)], err)
	}
	bad := filepath.Join(dir, "bad.plt")
	if err := os.WriteFile(bad, []byte("PLTRACE\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "bad.perfetto-trace")
	code, _, stderr = runCLI(t, "export", "--format", "perfetto-proto", "-o", out2, bad)
	if code != 2 || !strings.Contains(stderr, "read "+bad) {
		t.Errorf("bad trace: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a bad trace left a file behind")
	}
}
