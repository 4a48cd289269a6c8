package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/wire"
)

// memConn is a Conn over a byte slice: reads come from it, writes are dropped.
type memConn struct {
	r   *bytes.Reader
	ctr Counters
}

func (m *memConn) Read(p []byte) (int, error)         { return m.r.Read(p) }
func (m *memConn) Write(p []byte) (int, error)        { return len(p), nil }
func (m *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (m *memConn) SetWriteDeadline(t time.Time) error { return nil }
func (m *memConn) Close() error                       { return nil }
func (m *memConn) Counters() *Counters                { return &m.ctr }
func (m *memConn) Family() trace.Family               { return trace.FamilyUnknown }
func (m *memConn) LocalAddr() string                  { return "mem" }
func (m *memConn) RemoteAddr() string                 { return "mem" }

// countBudget is a Budget of max bytes that never waits.
type countBudget struct {
	mu        sync.Mutex
	used, max int64
}

func (b *countBudget) Reserve(n int64, deadline time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *countBudget) Free(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// held returns the bytes reserved.
func (b *countBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func header(size uint32) []byte {
	return binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, wire.Magic), size)
}

// Frames up to KeepFrameBytes use the reader's buffer; larger ones memory of their own, counted
// in the budget until the next large frame that cannot reuse it, or, once taken, until freed;
// a frame that does not fit the budget is refused; a frame above the cap is a protocol error.
func TestFrameReaderBudget(t *testing.T) {
	small, large, mapped := make([]byte, 100), make([]byte, KeepFrameBytes+1), make([]byte, mapFrameBytes+1)
	var in []byte
	for _, p := range [][]byte{small, large, mapped, large, small} {
		in = append(append(in, header(uint32(len(p)))...), p...)
	}
	b := &countBudget{max: 4 << 20}
	fr := NewFrameReader(&memConn{r: bytes.NewReader(in)}, 2<<20)
	fr.Budget = b
	// The mapped frame's memory is more than twice the next large frame's: freed, not reused.
	// The last large frame's memory is kept (and counted) for a next one.
	want := []int64{0, int64(len(large)), int64(len(mapped)), int64(len(large)), int64(len(large))}
	var free func()
	for i, w := range want {
		p, err := fr.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if int(binary.LittleEndian.Uint32(fr.Header()[4:])) != len(p) {
			t.Fatalf("frame %d: header says %x, payload %d bytes", i, fr.Header(), len(p))
		}
		held := b.held()
		if free != nil {
			held -= int64(len(large)) // the frame taken before is still held
		}
		if held != w {
			t.Errorf("frame %d of %d bytes: budget holds %d, want %d", i, len(p), held, w)
		}
		if i == 1 {
			_, free = fr.Take(p)
		}
	}
	free()
	fr.Release()
	if u := b.held(); u != 0 {
		t.Errorf("budget holds %d bytes after every frame was freed", u)
	}

	fr = NewFrameReader(&memConn{r: bytes.NewReader(append(header(uint32(len(mapped))), mapped...))}, 2<<20)
	fr.Budget = &countBudget{max: 1 << 20}
	fr.Frame = time.Millisecond
	if _, err := fr.Read(); !errors.Is(err, errNoMemory) {
		t.Errorf("frame larger than the budget: %v, want %v", err, errNoMemory)
	}
	fr = NewFrameReader(&memConn{r: bytes.NewReader(header(3 << 20))}, 2<<20)
	if _, err := fr.Read(); !errors.Is(err, wire.ErrFrameTooLarge) {
		t.Errorf("frame above the cap: %v, want %v", err, wire.ErrFrameTooLarge)
	}
	fr = NewFrameReader(&memConn{r: bytes.NewReader(append(header(10), 1, 2, 3))}, 2<<20)
	if _, err := fr.Read(); err != io.ErrUnexpectedEOF {
		t.Errorf("frame cut short: %v, want %v", err, io.ErrUnexpectedEOF)
	}
}

// FuzzFrameReader feeds arbitrary bytes to a reader with a memory budget: no panic, every
// payload as long as its header says and within the cap, and the budget back to zero once the
// frames are freed.
func FuzzFrameReader(f *testing.F) {
	f.Add(append(header(4), 1, 2, 3, 4))
	f.Add(append(append(header(0), header(3)...), 9, 9, 9))
	f.Add(append(header(KeepFrameBytes+1), make([]byte, KeepFrameBytes+1)...))
	f.Add(header(1 << 30))
	f.Add([]byte("SLPV\x05\x00\x00"))
	f.Add([]byte("VPLS\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const maxFrame = 256 << 10
		b := &countBudget{max: 512 << 10}
		fr := NewFrameReader(&memConn{r: bytes.NewReader(data)}, maxFrame)
		fr.Budget = b
		var frees []func()
		for i := 0; i < 64; i++ {
			p, err := fr.Read()
			if err != nil {
				break
			}
			if len(p) > maxFrame || int(binary.LittleEndian.Uint32(fr.Header()[4:])) != len(p) {
				t.Fatalf("payload of %d bytes under header %x (cap %d)", len(p), fr.Header(), maxFrame)
			}
			if i%2 == 1 {
				_, free := fr.Take(p)
				frees = append(frees, free)
			}
		}
		fr.Release()
		for _, free := range frees {
			free()
		}
		if u := b.held(); u != 0 {
			t.Fatalf("budget holds %d bytes after every frame was freed", u)
		}
	})
}

// A connection's large frames reuse one buffer while they come (no fresh memory per frame), a
// frame of less than half of it or more than it gets its own, taken frames give theirs back
// when freed, and an idle connection's kept memory leaves the budget within 2·spareKeep.
func TestFrameReaderReuse(t *testing.T) {
	sizes := []int{mapFrameBytes, mapFrameBytes - 5, mapFrameBytes, KeepFrameBytes + 1, 3 * mapFrameBytes, 3 * mapFrameBytes}
	var in []byte
	for _, n := range sizes {
		in = append(append(in, header(uint32(n))...), make([]byte, n)...)
	}
	b := &countBudget{max: 16 << 20}
	fr := NewFrameReader(&memConn{r: bytes.NewReader(in)}, 4<<20)
	fr.Budget = b
	var prev *byte
	for i, n := range sizes {
		p, err := fr.Read()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		reused := &p[:1][0] == prev
		if want := i == 1 || i == 2 || i == 5; reused != want {
			t.Errorf("frame %d of %d bytes: reused the last frame's memory %v, want %v", i, n, reused, want)
		}
		if i == 2 { // taken and freed: given back for the next frame
			var free func()
			p, free = fr.Take(p)
			free()
		}
		prev = &p[:1][0]
		if h, want := b.held(), int64(cap(p)); h != want {
			t.Errorf("frame %d: budget holds %d bytes, want %d (this frame's memory)", i, h, want)
		}
	}
	// Idle: the kept memory is freed within 2·spareKeep.
	deadline := time.Now().Add(5 * time.Second)
	fr.recycle()
	for b.held() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h := b.held(); h != 0 {
		t.Errorf("idle reader: budget holds %d bytes 5s after its last frame", h)
	}
	fr.Release()
}
