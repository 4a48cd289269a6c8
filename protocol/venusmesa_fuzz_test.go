package protocol

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realVenusFrames returns the request frames of the Venus Plus phase-9 run, every byte (from
// the strace of the server): the seeds of the venus-mesa fuzz targets are real frames.
func realVenusFrames(tb testing.TB) [][]byte {
	tb.Helper()
	f, err := os.Open(filepath.Join(realVenus, "server-phase9.strace.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	var stream []byte
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		if m := straceRead.FindStringSubmatch(sc.Text()); m != nil {
			b, err := hex.DecodeString(strings.ReplaceAll(m[1], `\x`, ""))
			if err != nil {
				tb.Fatal(err)
			}
			stream = append(stream, b...)
		}
	}
	var frames [][]byte
	for len(stream) >= 8 {
		n := 8 + int(le.Uint32(stream[4:]))
		if n > len(stream) {
			break
		}
		frames = append(frames, stream[:n])
		stream = stream[n:]
	}
	return frames
}

// venusMesaSeeds are real request frames: single commands, the multi-command frames 102, 106
// and 116, a Venus Plus batch, and a few frames back to back.
func venusMesaSeeds(tb testing.TB) [][]byte {
	fr := realVenusFrames(tb)
	if len(fr) < 118 {
		tb.Fatalf("%d frames in the strace, want 118", len(fr))
	}
	pick := func(i int) []byte { return fr[i-1] }
	seeds := [][]byte{pick(1), pick(75), pick(98), pick(102), pick(106), pick(109), pick(116), pick(118)}
	seeds = append(seeds, pick(108)[:600], pick(111))
	var run []byte
	for i := 95; i <= 107; i++ {
		run = append(run, pick(i)...)
	}
	return append(seeds, run)
}

func FuzzDecodeVenusMesa(f *testing.F) {
	spec, err := BuiltinSpec("venus-mesa")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range venusMesaSeeds(f) {
		f.Add(s, []byte{0x7f}, uint8(255))
		f.Add(s, []byte{7, 0x7f, 0x3f}, uint8(64))
	}
	f.Fuzz(func(t *testing.T, data, cuts []byte, head uint8) {
		if len(data) > 1<<16 {
			return
		}
		msgs := feed(t, spec, data, cuts, int(head))
		checkMessages(t, data, msgs)
		for _, m := range msgs {
			if b := m.Batch; b != nil && (len(b.Commands) == 0 || len(b.Commands) > maxBatch) {
				t.Fatalf("batch of %d commands", len(b.Commands))
			}
		}
	})
}

// FuzzSplitVenus walks arbitrary bytes as a Venus command stream: it must end, never read
// past the bytes given, and find at most maxBatch commands.
func FuzzSplitVenus(f *testing.F) {
	for _, s := range venusMesaSeeds(f) {
		f.Add(s[8:], int64(len(s)-8))
		f.Add(s[8:min(len(s), 264)], int64(len(s)-8))
	}
	f.Fuzz(func(t *testing.T, head []byte, size int64) {
		s := splitVenus(head, size)
		if s.n < 0 || s.n > maxBatch || s.split && s.more {
			t.Fatalf("split %d commands, split %v more %v", s.n, s.split, s.more)
		}
		if s.split && size > int64(len(head)) {
			t.Fatalf("split a %d-byte stream from %d bytes", size, len(head))
		}
	})
}
