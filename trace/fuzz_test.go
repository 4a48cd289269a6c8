package trace

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"testing/iotest"

	"github.com/perflab/perflab/internal/testutil"
)

// FuzzReadTrace is RELIABILITY A1: any bytes are an error or a partial read whose recovery adds
// up, never a panic. The committed corpus (testdata/fuzz/FuzzReadTrace) is rewritten by
// `go test -run TestFuzzSeeds -update ./trace/`.
func FuzzReadTrace(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		prints, r, err := decodePrints(data)
		if err != nil {
			if r != nil {
				t.Fatalf("error %v with a reader", err)
			}
			return
		}
		rec := r.Recovery()
		if rec.ChunksRead+rec.ChunksBad < 1 || rec.ChunksRead < 0 || rec.ChunksBad < 0 || rec.UnknownChunks < 0 || rec.UnknownChunks > rec.ChunksRead {
			t.Fatalf("recovery %+v", rec)
		}
		if rec.BytesSkipped < 0 || rec.TruncatedBytes < 0 || rec.BytesSkipped+rec.TruncatedBytes > int64(len(data)-headerSize) {
			t.Fatalf("recovery %+v for %d bytes", rec, len(data))
		}
		// Every record takes at least two bytes of a chunk body.
		if len(prints) > len(data)/2 {
			t.Fatalf("%d records from %d bytes", len(prints), len(data))
		}
		// Reading again, as a stream of unknown size in small reads, gives the same records and
		// the same recovery: nothing depends on how the bytes arrive.
		again, r2, err := decodeFrom(iotest.HalfReader(bytes.NewReader(data)))
		if err != nil || !equalPrints(prints, again) || r2.Recovery() != rec {
			t.Fatalf("streamed read differs: %v", err)
		}
	})
}

// fuzzSeeds returns the seed corpus: valid traces, empty, header only, one chunk, cut, flipped
// and crafted files.
func fuzzSeeds(t testing.TB) map[string][]byte {
	seeds := map[string][]byte{}
	valid := func(name string, n, perChunk int, seed int64, payload bool) []byte {
		rng := rand.New(rand.NewSource(seed))
		var set []written
		for len(set) < n {
			set = append(set, randSet(rng)...)
		}
		set = set[:n]
		if !payload {
			for i := range set {
				set[i].Event.Payload = nil
			}
		}
		var buf bytes.Buffer
		w, err := NewWriter(&buf, testMeta, &WriterOptions{FlushRecords: perChunk, FlushInterval: -1, Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		writeSet(t, w, set)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		seeds[name] = buf.Bytes()
		return buf.Bytes()
	}
	small := valid("valid-small", 6, 3, 1, false)
	valid("valid-payload", 12, 4, 2, true)
	valid("valid-one-records-chunk", 8, 100, 3, true)
	valid("valid-empty", 0, 10, 4, false)
	mid := valid("valid-many-chunks", 40, 2, 5, false)
	v1 := fileHeader(FormatVersion)
	seeds["empty"] = nil
	seeds["magic-only"] = []byte(Magic)
	seeds["header-only"] = v1
	seeds["meta-only"] = cat(v1, metaChunk)
	seeds["future-version"] = cat(fileHeader(FormatVersion+1), metaChunk)
	seeds["cut-in-chunk-header"] = small[:headerSize+5]
	seeds["cut-in-body"] = small[:len(small)-20]
	seeds["cut-mid"] = mid[:len(mid)/2]
	flip := func(name string, src []byte, at int) {
		b := append([]byte(nil), src...)
		b[at] ^= 0x10
		seeds[name] = b
	}
	flip("flip-meta-header", small, headerSize+6)
	flip("flip-records-body", small, len(small)/2)
	flip("flip-footer", small, len(small)-3)
	garbage := append([]byte(nil), mid...)
	rand.New(rand.NewSource(6)).Read(garbage[len(mid)/3 : len(mid)/3+64])
	seeds["garbage-span"] = garbage
	seeds["length-max"] = cat(v1, metaChunk, rawChunk(chunkRecords, 1<<32-1, nil, true))
	seeds["length-past-end"] = cat(v1, metaChunk, rawChunk(chunkRecords, 1000, []byte{1, 2}, true))
	seeds["unknown-chunk"] = cat(v1, metaChunk, goodChunk(99, []byte("x")))
	seeds["string-past-chunk"] = cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagMarker, 0, 0, 0, 0}, uv(1000))))
	seeds["payload-too-long"] = cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagEvent | evExtra, exPayload, 0, 0, 0, 0, 0, 0, 0, 0}, uv(300))))
	seeds["sync-words"] = cat(v1, metaChunk, bytes.Repeat(syncBytes, 64))
	// Chunks out of place: duplicated, swapped, appended after the footer.
	sp := chunkSpans(t, mid)
	ch := func(i int) []byte { return mid[sp[i].start:sp[i].end] }
	seeds["chunk-duplicated"] = cat(mid[:sp[3].end], ch(3), mid[sp[3].end:])
	seeds["chunks-swapped"] = cat(mid[:sp[2].start], ch(3), ch(2), mid[sp[3].end:])
	seeds["chunk-after-footer"] = cat(mid, ch(2))
	seeds["trace-appended"] = cat(small, small)
	return seeds
}

// TestFuzzSeeds checks that the committed corpus holds the seeds (rewriting it with -update).
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadTrace")
	seeds := fuzzSeeds(t)
	if testutil.Update() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range seeds {
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < 20 {
		t.Fatalf("%d seeds in %s, want at least 20 (run with -update)", len(entries), dir)
	}
	for name := range seeds {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("seed %s missing (run with -update)", name)
		}
	}
}
