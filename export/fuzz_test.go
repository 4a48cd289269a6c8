package export

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
)

// FuzzTraceReports feeds arbitrary bytes as a trace file to the Perfetto and pprof writers:
// they may refuse it, but never panic, and what they accept must come out valid (Chrome trace
// JSON whose async slices pair up; a pprof profile that parses and checks).
func FuzzTraceReports(f *testing.F) {
	dir := f.TempDir()
	for _, p := range []string{synthTrace{tokens: 1}.write(f, dir, "a.plt"), synthTrace{tokens: 1, tracer: true}.write(f, dir, "b.plt")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("not a trace"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "fuzz.plt")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Perfetto(&buf, protocol.Files([]string{path}, nil), analyzers.Options{}); err == nil {
			var ct chromeTrace
			if err := json.Unmarshal(buf.Bytes(), &ct); err != nil {
				t.Fatalf("invalid JSON accepted: %v", err)
			}
			checkChrome(t, ct)
		}
		buf.Reset()
		if err := Pprof(&buf, protocol.Files([]string{path}, nil), analyzers.Options{}); err == nil {
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("pprof output does not parse: %v", err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatalf("pprof output invalid: %v", err)
			}
		}
	})
}
