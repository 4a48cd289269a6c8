package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/trace"
)

func TestExportTimelineAndProfile(t *testing.T) {
	code, out, errs := runCLI(t, "export", "--format", "perfetto", pingpongTrace)
	if code != 0 || errs != "" {
		t.Fatalf("export --format perfetto: exit %d, stderr %q", code, errs)
	}
	var ct struct {
		TraceEvents []struct {
			Ph  string `json:"ph"`
			Cat string `json:"cat"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal([]byte(out), &ct); err != nil {
		t.Fatalf("perfetto export is not JSON: %v", err)
	}
	n := map[string]int{}
	for _, e := range ct.TraceEvents {
		n[e.Ph+" "+e.Cat]++
	}
	// pingpong.plt: 300 calls, 150 round trips (docs: fixtures/README.md).
	if n["X ebpf"] != 300 || n["b round_trip"] != 150 {
		t.Errorf("perfetto export: %v; want 300 call slices and 150 round trips", n)
	}

	dst := filepath.Join(t.TempDir(), "pp.pb.gz")
	code, out, errs = runCLI(t, "export", "--format", "pprof", "-o", dst, pingpongTrace)
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("export --format pprof: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	b, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 20 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("pprof export is not a gzipped profile (%d bytes)", len(b))
	}
}

// TestExportTimelineBadInput: the perfetto and pprof exports refuse unreadable traces like the
// others, with one line naming the file and the offset, and warn about a cut one.
func TestExportTimelineBadInput(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(pingpongTrace)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	future := append([]byte(nil), good...)
	binary.LittleEndian.PutUint16(future[len(trace.Magic):], trace.FormatVersion+1)
	cases := []struct {
		name, path string
		want       []string
	}{
		{"missing", filepath.Join(dir, "nope.plt"), []string{"nope.plt", "no such file"}},
		{"wrong magic", write("magic.plt", []byte("this is not a trace at all")), []string{"magic.plt", "offset 0", "bad magic"}},
		{"future version", write("future.plt", future), []string{"future.plt", "offset 8"}},
		{"empty", write("empty.plt", nil), []string{"empty.plt", "offset 0"}},
	}
	for _, tc := range cases {
		for _, format := range []string{"perfetto", "pprof"} {
			out := filepath.Join(dir, "out-"+format)
			code, stdout, errs := runCLI(t, "export", "--format", format, "-o", out, tc.path)
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			if code != ExitBadInput || len(lines) != 1 || !strings.HasPrefix(errs, "perflab export: read "+tc.path+": ") {
				t.Errorf("%s (%s): exit %d, stderr %q; want exit 2 and one line", tc.name, format, code, errs)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%s (%s): stderr %q does not say %q", tc.name, format, errs, w)
				}
			}
			if stdout != "" {
				t.Errorf("%s (%s): wrote to stdout", tc.name, format)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s (%s): output file created for a bad trace", tc.name, format)
			}
		}
	}

	var many bytes.Buffer
	opt := fixtures.Options()
	opt.FlushRecords = 32
	w, err := trace.NewWriter(&many, fixtures.Meta("ebpf", "venus"), opt)
	if err != nil {
		t.Fatal(err)
	}
	if err := fixtures.PingPong(w, 150, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cut := write("cut.plt", many.Bytes()[:many.Len()*2/3])
	for _, format := range []string{"perfetto", "pprof"} {
		code, out, errs := runCLI(t, "export", "--format", format, cut)
		if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "warning: "+cut) || out == "" {
			t.Errorf("cut trace (%s): exit %d, stderr %q, %d bytes; want exit 0, output and a one-line warning", format, code, errs, len(out))
		}
	}
}
