package cli

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// countedFile is a trace opened by openInputFile under a test: it counts the bytes read from it.
type countedFile struct {
	f    *os.File
	mu   *sync.Mutex
	read *int64
}

func (c countedFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.mu.Lock()
	*c.read += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c countedFile) Seek(off int64, whence int) (int64, error) { return c.f.Seek(off, whence) }
func (c countedFile) Close() error                              { return c.f.Close() }
func (c countedFile) Stat() (fs.FileInfo, error)                { return c.f.Stat() }

// countOpens makes openInputFile count the opens of each path and the bytes read from it until
// the test ends.
func countOpens(t *testing.T) (opens map[string]int, read map[string]*int64) {
	t.Helper()
	var mu sync.Mutex
	opens, read = map[string]int{}, map[string]*int64{}
	old := openInputFile
	openInputFile = func(path string) (io.ReadSeekCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		opens[path]++
		if read[path] == nil {
			read[path] = new(int64)
		}
		return countedFile{f, &mu, read[path]}, nil
	}
	t.Cleanup(func() { openInputFile = old })
	return opens, read
}

// TestOneOpenPerTrace: every verb that reads traces opens each of them once and reads it once
// (no byte of it twice), and the layers below take the open file, not its path: analyze
// (auto-detected and with a protocol given, and its pprof and perfetto formats), compare,
// gate, model, and every export (jsonl, csv, pprof, perfetto, perfetto-proto, parquet), with
// --protocol auto and with a protocol given.
func TestOneOpenPerTrace(t *testing.T) {
	dir := t.TempDir()
	base, co := filepath.Join(dir, "base.plt"), filepath.Join(dir, "co.plt")
	size := map[string]int64{}
	for src, dst := range map[string]string{"testdata/model/baseline-1ms.plt": base, "testdata/model/coalesce-1ms.plt": co} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		size[dst] = int64(len(b))
	}
	for _, tc := range []struct {
		name  string
		args  []string
		files []string
	}{
		{"analyze", []string{"analyze", "--format", "json", base, co}, []string{base, co}},
		{"analyze venus", []string{"analyze", "--format", "json", "--protocol", "venus", base}, []string{base}},
		{"compare", []string{"compare", "--format", "json", base, co}, []string{base, co}},
		{"compare venus", []string{"compare", "--format", "json", "--protocol", "venus", base, co}, []string{base, co}},
		{"gate", []string{"gate", "--baseline", base, "--format", "json", co}, []string{base, co}},
		{"gate venus", []string{"gate", "--baseline", base, "--format", "json", "--protocol", "venus", co}, []string{base, co}},
		{"model", []string{"model", "--from", base, "--json"}, []string{base}},
		{"analyze pprof", []string{"analyze", "--format", "pprof", "-o", filepath.Join(dir, "a.pb.gz"), base, co}, []string{base, co}},
		{"analyze perfetto", []string{"analyze", "--format", "perfetto", "-o", filepath.Join(dir, "a.json"), base, co}, []string{base, co}},
		{"analyze perfetto venus", []string{"analyze", "--format", "perfetto", "--protocol", "venus", "-o", filepath.Join(dir, "a.json"), base, co}, []string{base, co}},
		{"export jsonl", []string{"export", "--format", "jsonl", "-o", filepath.Join(dir, "e.jsonl"), base}, []string{base}},
		{"export csv", []string{"export", "--format", "csv", "-o", filepath.Join(dir, "e.csv"), base}, []string{base}},
		{"export pprof", []string{"export", "--format", "pprof", "-o", filepath.Join(dir, "e.pb.gz"), base}, []string{base}},
		{"export perfetto", []string{"export", "--format", "perfetto", "-o", filepath.Join(dir, "e.json"), base}, []string{base}},
		{"export perfetto-proto", []string{"export", "--format", "perfetto-proto", "-o", filepath.Join(dir, "e.pftrace"), base}, []string{base}},
		{"export parquet", []string{"export", "--format", "parquet", "-o", filepath.Join(dir, "pq"), base, co}, []string{base, co}},
		{"export parquet venus", []string{"export", "--format", "parquet", "--protocol", "venus", "-o", filepath.Join(dir, "pq2"), base, co}, []string{base, co}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens, read := countOpens(t)
			code, _, errs := gateCLI(t, tc.args...)
			if code == 2 {
				t.Fatalf("perflab %v: exit 2: %s", tc.args, errs)
			}
			for _, f := range tc.files {
				if opens[f] != 1 {
					t.Errorf("perflab %v opened %s %d times, want once", tc.args, f, opens[f])
				}
				var n int64
				if read[f] != nil {
					n = *read[f]
				}
				if n != size[f] {
					t.Errorf("perflab %v read %d bytes of %s, want its %d once", tc.args, n, filepath.Base(f), size[f])
				}
			}
			if len(opens) != len(tc.files) {
				t.Errorf("perflab %v opened %v, want only %v", tc.args, opens, tc.files)
			}
		})
	}
}

// TestOneReadHosts: merge reads each recording once; analyze of recordings of one system from
// several hosts reads them twice, once for the analysis and once, whole, to merge them (the one
// verb that does, docs/design.md).
func TestOneReadHosts(t *testing.T) {
	paths := recordHosts(t, 1, 300*time.Millisecond)
	size := map[string]int64{}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size[p] = fi.Size()
	}
	for _, tc := range []struct {
		name  string
		args  []string
		times int
	}{
		{"merge", append([]string{"merge", "-o", filepath.Join(t.TempDir(), "m.plt")}, paths...), 1},
		{"analyze", append([]string{"analyze", "--format", "json"}, paths...), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens, read := countOpens(t)
			if code, _, errs := runCLI(t, tc.args...); code != 0 {
				t.Fatalf("perflab %v: exit %d: %s", tc.args, code, errs)
			}
			for _, p := range paths {
				var n int64
				if read[p] != nil {
					n = *read[p]
				}
				if opens[p] != tc.times || n != int64(tc.times)*size[p] {
					t.Errorf("perflab %s: %s opened %d times, %d of its %d bytes read; want %d times each", tc.name, filepath.Base(p), opens[p], n, size[p], tc.times)
				}
			}
		})
	}
}
