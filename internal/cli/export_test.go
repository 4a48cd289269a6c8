package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

const pingpongTrace = "../../fixtures/traces/pingpong.plt"

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = Main(context.Background(), env, args)
	if strings.Contains(errb.String(), "panic") || strings.Contains(errb.String(), "internal error") {
		t.Fatalf("perflab %v: %s", args, errb.String())
	}
	return code, out.String(), errb.String()
}

func TestExportGolden(t *testing.T) {
	for _, format := range []string{"jsonl", "csv"} {
		code, out, errs := runCLI(t, "export", "--format", format, pingpongTrace)
		if code != 0 || errs != "" {
			t.Fatalf("export --format %s: exit %d, stderr %q", format, code, errs)
		}
		testutil.Golden(t, "export_pingpong."+format, []byte(out))
	}
}

func TestExportToFile(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "out.jsonl")
	code, out, errs := runCLI(t, "export", pingpongTrace, "-o", dst, "--format", "jsonl")
	if code != 0 || out != "" || errs != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	_, want, _ := runCLI(t, "export", "--format", "jsonl", pingpongTrace)
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("-o FILE differs from stdout")
	}
}

// TestExportExitCodes is RELIABILITY A9: unreadable input exits 2 with one line naming the file
// (and the offset when there is one); a cut but readable trace exits 0 with a one-line warning.
func TestExportExitCodes(t *testing.T) {
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
	// A chunk header (format 2: sync, type, length, seq, body CRC), its checksum right, whose
	// length field claims 4 GiB.
	hdr := []byte{0xab, 'P', 'L', 'C', 2, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0}
	hdr = binary.LittleEndian.AppendUint32(hdr, crc32.Checksum(hdr, crc32.MakeTable(crc32.Castagnoli)))
	hostile := append(append([]byte(nil), good[:len(trace.Magic)+2]...), hdr...)
	badHeader := append(append([]byte(nil), good[:len(trace.Magic)+2]...), 0xab, 'P', 'L', 'C', 2, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	cases := []struct {
		name, path string
		want       []string // substrings of the one stderr line
	}{
		{"missing", filepath.Join(dir, "nope.plt"), []string{"nope.plt", "no such file"}},
		{"directory", dir, []string{dir, "offset 0", "directory"}},
		{"wrong magic", write("magic.plt", []byte("this is not a trace at all")), []string{"magic.plt", "offset 0", "bad magic"}},
		{"future version", write("future.plt", future), []string{"future.plt", "offset 8", "format version " + strconv.Itoa(trace.FormatVersion+1)}},
		{"hostile length", write("hostile.plt", hostile), []string{"hostile.plt", "offset 15", "chunk length 4294967295 exceeds"}},
		{"bad chunk header", write("badheader.plt", badHeader), []string{"badheader.plt", "offset 10", "bad chunk header"}},
		{"header only", write("header.plt", good[:10]), []string{"header.plt", "offset 10"}},
		{"empty", write("empty.plt", nil), []string{"empty.plt", "offset 0", "empty file"}},
	}
	for _, tc := range cases {
		for _, format := range []string{"jsonl", "csv"} {
			code, out, errs := runCLI(t, "export", "--format", format, tc.path)
			lines := strings.Split(strings.TrimSuffix(errs, "\n"), "\n")
			if code != ExitBadInput || len(lines) != 1 || !strings.HasPrefix(errs, "perflab export: read ") {
				t.Errorf("%s (%s): exit %d, stderr %q; want exit 2 and one line", tc.name, format, code, errs)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("%s: stderr %q does not say %q", tc.name, errs, w)
				}
			}
			if out != "" {
				t.Errorf("%s: wrote %d bytes to stdout", tc.name, len(out))
			}
		}
	}

	// A trace of many chunks, cut in the middle of one.
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
	code, out, errs := runCLI(t, "export", "--format", "jsonl", cut)
	if code != 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "warning: "+cut) || !strings.Contains(errs, "bytes truncated") {
		t.Fatalf("cut trace: exit %d, stderr %q; want exit 0 and a one-line warning", code, errs)
	}
	if !strings.Contains(out, `"type":"recovery"`) || !strings.Contains(out, `"type":"event"`) {
		t.Fatalf("cut trace export lacks events or the recovery line")
	}
}

func TestExportUsage(t *testing.T) {
	if code, _, errs := runCLI(t, "export", "--format", "xml", pingpongTrace); code != ExitBadInput || !strings.Contains(errs, `"xml" unknown`) {
		t.Errorf("unknown format: exit %d, %q", code, errs)
	}
	if code, _, _ := runCLI(t, "export"); code != ExitBadInput {
		t.Errorf("no trace: exit %d", code)
	}
}

func TestExportOutputErrors(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "no", "such", "dir", "out.csv")
	code, _, errs := runCLI(t, "export", "--format", "csv", "-o", dst, pingpongTrace)
	if code != ExitBadInput || !strings.HasPrefix(errs, "perflab export: create "+dst) {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	bad := filepath.Join(t.TempDir(), "bad.plt")
	os.WriteFile(bad, []byte("nonsense"), 0o644)
	dst = filepath.Join(t.TempDir(), "out.csv")
	if code, _, _ := runCLI(t, "export", "--format", "csv", "-o", dst, bad); code != ExitBadInput {
		t.Fatalf("bad trace: exit %d", code)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Fatal("output file created for a bad trace")
	}
}
