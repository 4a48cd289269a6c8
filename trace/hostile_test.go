package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func fileHeader(version uint16) []byte {
	return binary.LittleEndian.AppendUint16([]byte(Magic), version)
}

// rawSeq numbers the chunks rawChunk builds, so that crafted files never repeat a sequence
// number by accident.
var rawSeq uint32 = 1

// rawChunk builds a chunk header claiming length bytes of type typ with the body CRC of body;
// headerOK false breaks its header CRC. The body is appended as given. Each chunk gets the next
// sequence number.
func rawChunk(typ byte, length uint32, body []byte, headerOK bool) []byte {
	rawSeq++
	return seqChunk(typ, length, rawSeq, body, headerOK)
}

// seqChunk is rawChunk with sequence number seq.
func seqChunk(typ byte, length, seq uint32, body []byte, headerOK bool) []byte {
	h := make([]byte, chunkHeaderSize)
	binary.LittleEndian.PutUint32(h[0:], syncWord)
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:], length)
	binary.LittleEndian.PutUint32(h[9:], seq)
	binary.LittleEndian.PutUint32(h[13:], crc32.Checksum(body, castagnoli))
	hc := crc32.Checksum(h[:17], castagnoli)
	if !headerOK {
		hc ^= 1
	}
	binary.LittleEndian.PutUint32(h[17:], hc)
	return append(h, body...)
}

func goodChunk(typ byte, body []byte) []byte { return rawChunk(typ, uint32(len(body)), body, true) }

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var metaChunk = seqChunk(chunkMeta, 26, 0, []byte(`{"version":"x","host":"h"}`), true)

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// TestHostile is RELIABILITY A4: crafted files with hostile lengths and contents are an error or
// a counted skip, without a loop and without allocating by a length read from the file.
func TestHostile(t *testing.T) {
	v1 := fileHeader(FormatVersion)
	big := make([]byte, MaxChunkBody) // a body of exactly the cap, garbage CRC
	syncs := bytes.Repeat(syncBytes, 1<<18)
	okEvent := []byte{tagEvent | 1<<evDirShift, 0, 0, 0, 0, 0, 0, 0, 0}
	tests := []struct {
		name    string
		data    []byte
		wantErr string // substring of the error; "" means no error
		check   func(rec Recovery, records int) bool
	}{
		{"empty", nil, "offset 0: empty file", nil},
		{"short magic", []byte("PLTR"), "offset 4: file ends inside", nil},
		{"wrong magic", []byte("GIF89a\x00\x00\x01\x00garbage"), "offset 0: not a perflab trace", nil},
		{"future version", fileHeader(FormatVersion + 1), "offset 8: format version " + strconv.Itoa(FormatVersion+1), nil},
		{"version 0", cat(fileHeader(0), metaChunk), "offset 8: format version 0", nil},
		{"header only", v1, "offset 10: no chunk", nil},
		{"meta length 0", cat(v1, goodChunk(chunkMeta, nil)), "offset 10: meta chunk is not valid JSON", nil},
		{"records length 0", cat(v1, metaChunk, goodChunk(chunkRecords, nil)), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksRead == 2 && r.ChunksBad == 0 }},
		{"length 2^32-1", cat(v1, rawChunk(chunkRecords, 1<<32-1, nil, true)), "offset 15: chunk length 4294967295 exceeds", nil},
		{"length 2^32-1 bad header", cat(v1, rawChunk(chunkRecords, 1<<32-1, nil, false)), "offset 10: bad chunk header", nil},
		{"length past file, alone", cat(v1, rawChunk(chunkMeta, 1<<20, []byte("{}"), true)), "offset 15: chunk length 1048576 runs past", nil},
		{"length past file", cat(v1, metaChunk, rawChunk(chunkRecords, 1<<20, []byte{1, 2, 3}, true)), "",
			func(r Recovery, n int) bool {
				return n == 0 && r.TruncatedBytes == chunkHeaderSize+3 && r.ChunksBad == 0
			}},
		{"length cap+1", cat(v1, metaChunk, rawChunk(chunkRecords, MaxChunkBody+1, nil, true)), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 1 && r.TruncatedBytes == chunkHeaderSize }},
		{"length cap, garbage body", cat(v1, metaChunk, rawChunk(chunkRecords, MaxChunkBody, nil, true), big), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 1 && r.ChunksRead == 1 && r.TruncatedBytes == 0 }},
		{"sync words only", cat(v1, metaChunk, syncs), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 1 && r.TruncatedBytes == int64(len(syncs)) }},
		{"string length past chunk", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagMarker, 0, 0, 0, 0}, uv(1000), []byte("abc")))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 && r.ChunksRead == 1 }},
		{"string length 2^63", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagLost}, uv(1<<63), []byte("abc")))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"string longer than MaxString", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagLost}, uv(MaxString+1), make([]byte, MaxString+1), uv(1)))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"payload longer than MaxPayload", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagEvent | evExtra, exPayload, 0, 0, 0, 0, 0, 0, 0, 0}, uv(MaxPayload+1), make([]byte, MaxPayload+1)))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"varint overflow", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagLost, 0}, bytes.Repeat([]byte{0xff}, 11)))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"pid wider than 32 bits", cat(v1, metaChunk, goodChunk(chunkRecords, cat([]byte{tagEvent, 0, 0}, uv(1<<40), uv(1), uv(0), []byte{0, 0}, uv(0)))), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"unknown record tag", cat(v1, metaChunk, goodChunk(chunkRecords, []byte{0x7f})), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"escaped dir that needs no escape", cat(v1, metaChunk, goodChunk(chunkRecords, []byte{tagEvent | evDirEsc<<evDirShift, byte(DirSend), 0, 0, 0, 0, 0, 0, 0})), "",
			func(r Recovery, n int) bool { return n == 0 && r.ChunksBad == 1 }},
		{"records before the fault come back", cat(v1, metaChunk, goodChunk(chunkRecords, cat(okEvent, []byte{0x7f}))), "",
			func(r Recovery, n int) bool { return n == 1 && r.ChunksBad == 1 }},
		{"unknown chunk type", cat(v1, metaChunk, goodChunk(200, []byte("future")), goodChunk(chunkRecords, okEvent)), "",
			func(r Recovery, n int) bool {
				return n == 1 && r.UnknownChunks == 1 && r.ChunksBad == 0 && r.ChunksRead == 3
			}},
		{"unknown chunk type first", cat(v1, goodChunk(200, []byte("future")), metaChunk), "",
			func(r Recovery, n int) bool { return r.UnknownChunks == 1 && r.ChunksRead == 2 }},
		{"meta JSON over the cap", cat(v1, goodChunk(chunkMeta, cat([]byte(`{"labels":{`), bytes.Repeat([]byte(`"a":"b",`), 200_000), []byte(`"a":"b"}}`)))), "offset 10: meta chunk of 1600020 bytes exceeds 262144", nil},
		{"meta JSON at the cap, distinct keys", cat(v1, goodChunk(chunkMeta, distinctLabels(maxJSONBody))), "",
			func(r Recovery, n int) bool { return r.ChunksRead == 1 && r.ChunksBad == 0 }},
		{"footer not JSON", cat(v1, metaChunk, goodChunk(chunkFooter, []byte("{"))), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 1 && !r.Clean }},
		{"meta damaged, records intact", cat(v1, rawChunk(chunkMeta, 2, []byte("{}"), false), goodChunk(chunkRecords, okEvent)), "",
			func(r Recovery, n int) bool { return n == 1 && r.ChunksBad == 1 && r.BytesSkipped == chunkHeaderSize+2 }},
		{"all damaged", cat(v1, rawChunk(chunkMeta, 2, []byte("{}"), false), []byte("garbage garbage garbage")), "offset 10: bad chunk header", nil},
		{"tail not a chunk", cat(v1, metaChunk, []byte("xyz")), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 1 && r.TruncatedBytes == 3 }},
		{"tail a cut header", cat(v1, metaChunk, syncBytes[:3]), "",
			func(r Recovery, n int) bool { return r.ChunksBad == 0 && r.TruncatedBytes == 3 }},
	}
	var slowest time.Duration
	for _, tc := range tests {
		for _, pipe := range []bool{false, true} {
			name := tc.name
			if pipe {
				name += " (stream)"
			}
			t.Run(name, func(t *testing.T) {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				start := time.Now()
				type result struct {
					n   int
					rec Recovery
					err error
				}
				done := make(chan result, 1)
				go func() {
					var src io.Reader = bytes.NewReader(tc.data)
					if pipe {
						src = iotest.HalfReader(src) // no Seek: the size is unknown
					}
					prints, r, err := decodeFrom(src)
					res := result{n: len(prints), err: err}
					if r != nil {
						res.rec = r.Recovery()
					}
					done <- res
				}()
				var res result
				select {
				case res = <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("reader still busy after 30 s: a loop")
				}
				if d := time.Since(start); d > slowest {
					slowest = d
				}
				runtime.ReadMemStats(&after)
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
					t.Errorf("allocated %d MiB reading a %d-byte file", alloc>>20, len(tc.data))
				}
				if tc.wantErr != "" {
					var fe *FormatError
					if !errors.As(res.err, &fe) || !strings.Contains(res.err.Error(), tc.wantErr) {
						t.Fatalf("err = %v, want a *FormatError containing %q", res.err, tc.wantErr)
					}
					return
				}
				if res.err != nil {
					t.Fatalf("err = %v, want a partial read", res.err)
				}
				if !tc.check(res.rec, res.n) {
					t.Fatalf("%d records, recovery %+v", res.n, res.rec)
				}
			})
		}
	}
	t.Logf("slowest case: %v", slowest)
}

// stallReader yields data, then returns (0, nil) forever, as a broken io.Reader may.
type stallReader struct{ data []byte }

func (s *stallReader) Read(p []byte) (int, error) {
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

func TestStalledSource(t *testing.T) {
	src := &stallReader{data: cat(fileHeader(FormatVersion), metaChunk, goodChunk(chunkRecords, []byte{tagEvent | 1<<evDirShift, 0, 0, 0, 0, 0, 0, 0, 0}))}
	r, err := NewReader(src)
	if err != nil {
		t.Fatal(err)
	}
	var rec Record
	if err := r.Next(&rec); err != nil {
		t.Fatalf("first record: %v", err)
	}
	if err := r.Next(&rec); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("Next on a stalled source = %v, want io.ErrNoProgress", err)
	}
}

// distinctLabels returns a meta JSON of about n bytes whose labels are all distinct.
func distinctLabels(n int) []byte {
	b := []byte(`{"labels":{"x":"y"`)
	for i := 0; len(b) < n-32; i++ {
		b = append(b, `,"`...)
		b = strconv.AppendInt(b, int64(i), 36)
		b = append(b, `":""`...)
	}
	return append(b, "}}"...)
}
