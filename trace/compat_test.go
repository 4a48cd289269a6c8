package trace

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/testutil"
)

var writeCompat = flag.Bool("write-compat", false, "write testdata/compat/v<FormatVersion>.plt with the current writer (once per format version; never rewrite an existing one)")

// compatDump prints a File one item per line in Go syntax, which keeps every byte of every
// string and payload, for the golden files of TestCompat.
func compatDump(f *File) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "meta %#v\n", f.Meta)
	for _, e := range f.Events {
		fmt.Fprintf(&b, "event %#v\n", e)
	}
	for _, c := range f.Connections {
		fmt.Fprintf(&b, "connection %#v\n", c)
	}
	for _, m := range f.Markers {
		fmt.Fprintf(&b, "marker %#v\n", m)
	}
	fmt.Fprintf(&b, "lost %#v\n", f.Lost)
	if f.Footer != nil {
		fmt.Fprintf(&b, "footer %#v\n", *f.Footer)
	}
	fmt.Fprintf(&b, "recovery %#v\n", f.Recovery)
	return b.Bytes()
}

// TestCompat is RELIABILITY A7: files written by every format version decode as they did when
// they were written. testdata/compat/vN.plt is frozen once per version (-write-compat); its
// decode is the golden vN.json (-update rewrites only the JSON).
func TestCompat(t *testing.T) {
	dir := filepath.Join("testdata", "compat")
	if *writeCompat {
		rng := rand.New(rand.NewSource(77))
		var set []written
		for len(set) < 400 {
			set = append(set, randSet(rng)...)
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: 50, FlushInterval: -1, Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		writeSet(t, w, set)
		w.SetStat("probe_ns", 1234)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "v"+itoa(FormatVersion)+".plt")
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%s exists: a released format's file is never rewritten", path)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "v*.plt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no compat traces in %s (%v)", dir, err)
	}
	for _, p := range files {
		f, err := ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if f.Recovery.Damaged() || len(f.Events) == 0 || len(f.Markers) == 0 || len(f.Connections) == 0 || len(f.Lost) == 0 {
			t.Fatalf("%s: %d events, %d markers, %d connections, %d lost, recovery %v", p, len(f.Events), len(f.Markers), len(f.Connections), len(f.Lost), f.Recovery)
		}
		testutil.Golden(t, filepath.Join("compat", strings.TrimSuffix(filepath.Base(p), ".plt")+".txt"), compatDump(f))
	}
}

func itoa(v int) string { return string(rune('0' + v)) }
