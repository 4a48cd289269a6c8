package trace

import (
	"encoding/binary"
	"testing"
)

// TestUvarintAtMatchesBinary: the reader's own varint decoding (one to three bytes unrolled)
// reads exactly what encoding/binary reads, and fails where it fails: truncated, overlong (an
// 11th byte) and overflowing (a 10th byte above 1) encodings, at every position of a buffer.
func TestUvarintAtMatchesBinary(t *testing.T) {
	var bufs [][]byte
	for _, v := range []uint64{0, 1, 127, 128, 300, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<35 + 7, 1<<63 + 5, ^uint64(0)} {
		bufs = append(bufs, binary.AppendUvarint(nil, v))
	}
	bufs = append(bufs,
		[]byte{0x80}, []byte{0x80, 0x80}, []byte{0xff, 0xff, 0xff}, // truncated
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},       // overflow
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x01}, // too long
		[]byte{0x81, 0x00}, []byte{0x80, 0x80, 0x00}, // not minimal: read as binary does
	)
	for _, b := range bufs {
		for _, pad := range []int{0, 1, 2, 5} {
			buf := append(append([]byte{}, b...), make([]byte, pad)...)
			if pad > 0 {
				buf = append(buf[:len(b)], 0x80, 0x80, 0x80, 0x80, 0x80)[:len(b)+pad] // continuation bytes after
			}
			for p := 0; p <= len(buf); p++ {
				want, n := binary.Uvarint(buf[p:])
				got, q := uvarintAt(buf, p)
				if n <= 0 {
					if q >= 0 {
						t.Errorf("% x at %d: read %d to %d, want an error", buf, p, got, q)
					}
					continue
				}
				if got != want || q != p+n {
					t.Errorf("% x at %d: %d to %d, want %d to %d", buf, p, got, q, want, p+n)
				}
			}
		}
	}
	if _, q := uvarintAt([]byte{1}, -1); q >= 0 {
		t.Errorf("a failed position read on: %d", q)
	}
}
