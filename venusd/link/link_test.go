package link

import (
	"bytes"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// H5: out-of-range link parameters are refused before anything runs (they used to hang: a
// 2562047h delay, a 1 bit/s link).
func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		delay, jitter time.Duration
		bw            float64
		want          string // "" valid
	}{
		{0, 0, 0, ""},
		{50 * time.Microsecond, time.Millisecond, 1e6 / 8, ""},
		{MaxDelay, MaxDelay, MaxBandwidth, ""},
		{0, 0, MinBandwidth, ""},
		{-time.Nanosecond, 0, 0, "delay"},
		{2562047 * time.Hour, 0, 0, "delay"},
		{0, -1, 0, "jitter"},
		{0, MaxDelay + 1, 0, "jitter"},
		{0, 0, 1.0 / 8, "bandwidth"},
		{0, 0, -1, "bandwidth"},
		{0, 0, math.NaN(), "bandwidth"},
		{0, 0, math.Inf(1), "bandwidth"},
		{0, 0, 2 * MaxBandwidth, "bandwidth"},
	} {
		err := Validate(tc.delay, tc.jitter, tc.bw)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), "want")) {
			t.Errorf("Validate(%v, %v, %g) = %v, want %q", tc.delay, tc.jitter, tc.bw, err, tc.want)
		}
	}
}

// SleepUntil never returns before its deadline, through each of its three stages.
func TestSleepUntilNotEarly(t *testing.T) {
	for _, d := range []time.Duration{0, 20 * time.Microsecond, 100 * time.Microsecond, 600 * time.Microsecond, 2 * time.Millisecond} {
		for i := 0; i < 5; i++ {
			at := time.Now().Add(d)
			SleepUntil(at)
			if now := time.Now(); now.Before(at) {
				t.Fatalf("SleepUntil(+%v) returned %v early", d, at.Sub(now))
			}
		}
	}
}

// The spin margin follows the timer's last wakeWindow wake-ups: the largest lateness plus half
// of it plus minSpin, between minSpin and maxSpin, maxSpin until enough were seen.
func TestSpinMargin(t *testing.T) {
	wakes.mu.Lock()
	saved := wakes.late
	savedNext, savedSeen, savedMargin := wakes.next, wakes.seen, wakes.margin.Load()
	wakes.late, wakes.next, wakes.seen = [wakeWindow]time.Duration{}, 0, 0
	wakes.margin.Store(0)
	wakes.mu.Unlock()
	defer func() {
		wakes.mu.Lock()
		wakes.late, wakes.next, wakes.seen = saved, savedNext, savedSeen
		wakes.margin.Store(savedMargin)
		wakes.mu.Unlock()
	}()
	us := time.Microsecond
	step := func(n int, late time.Duration, want time.Duration) {
		t.Helper()
		for i := 0; i < n; i++ {
			noteWake(late)
		}
		if got := SpinMargin(); got != want {
			t.Errorf("after %d wake-ups %v late: margin %v, want %v", n, late, got, want)
		}
	}
	step(wakeWindow-1, 10*us, maxSpin) // too few to go by
	step(1, 10*us, 35*us)              // 10 + 5 + 20
	step(1, -5*us, 35*us)              // early counts as on time; the others still rule
	step(1, 300*us, maxSpin)           // a late one: the largest margin
	step(wakeWindow-1, 2*us, maxSpin)  // still in the window
	step(1, 2*us, 23*us)               // out of it: 2 + 1 + 20
	step(wakeWindow, 0, minSpin)
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// The bandwidth is a token bucket of one frame: back-to-back frames leave at deadlines that
// follow from the first one (n·size/bw), however late their sender was, without rounding
// piling up (a 1 MiB frame takes 838,860.8 ns at 10 Gbit/s: rounded frame by frame, 1000 of
// them would end 0.8 µs early); after an idle stretch the link has no credit to burst with;
// delay and jitter come on top, in order.
func TestArrivalPacing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const bw = 1.25e9 // 10 Gbit/s, bytes/s
	const size = 1 << 20
	frames := func(k int) time.Duration { return time.Duration(float64(k*size) / bw * 1e9) }
	for _, tc := range []struct {
		name          string
		delay, jitter time.Duration
	}{{"bandwidth only", 0, 0}, {"with 50µs delay", 50 * time.Microsecond, 0}, {"with jitter", 100 * time.Microsecond, 300 * time.Microsecond}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{t: t0}
			l := &Link{bw: bw, delay: tc.delay, jitter: tc.jitter, now: clk.now, rng: rand.New(rand.NewPCG(1, 2))}
			var p pace
			prev := time.Time{}
			// 1000 frames sent in bursts of 10, the sender 3 µs late each time: the deadlines
			// still follow from the first frame.
			for i := 0; i < 1000; i++ {
				if i%10 == 0 && i > 0 {
					clk.t = clk.t.Add(3 * time.Microsecond)
				}
				at := l.arrival(clk.now(), size, &p)
				end := t0.Add(frames(i + 1))
				if !p.busy.Equal(end) {
					t.Fatalf("frame %d: serialisation ends at +%v, want +%v", i, p.busy.Sub(t0), end.Sub(t0))
				}
				if lo, hi := end.Add(tc.delay), end.Add(tc.delay+tc.jitter); at.Before(lo) || at.After(hi) && !at.Equal(prev) {
					t.Fatalf("frame %d: arrives at +%v, want +%v to +%v", i, at.Sub(t0), lo.Sub(t0), hi.Sub(t0))
				}
				if at.Before(prev) {
					t.Fatalf("frame %d arrives before frame %d", i, i-1)
				}
				prev = at
			}
			// The link idles for a second: the next frame starts when it is sent, and the one
			// after it a frame later; no credit was saved up.
			clk.t = p.busy.Add(time.Second)
			l.arrival(clk.now(), size, &p)
			if want := clk.t.Add(frames(1)); !p.busy.Equal(want) {
				t.Errorf("after idling: serialisation ends %v after the send, want %v", p.busy.Sub(clk.t), frames(1))
			}
			l.arrival(clk.now(), size, &p)
			if want := clk.t.Add(frames(2)); !p.busy.Equal(want) {
				t.Errorf("second frame after idling ends %v after the sends, want %v", p.busy.Sub(clk.t), frames(2))
			}
		})
	}
}

// Stats count late frames against LateAllowance and read the transport's rate from the frames
// written while the next one was already due.
func TestStats(t *testing.T) {
	t0 := time.Unix(1000, 0)
	us := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	const size = 125000 // 100 µs at 10 Gbit/s
	var s Stats
	var prev written
	// 100 frames due every 100 µs from +1000 µs, each asked to spend 1000 µs in the link; the
	// transport takes 125 µs for each (8 Gbit/s), so from the second frame on each is due
	// before the previous write ends and starts late by 25 µs more than the one before.
	for i := 0; i < 100; i++ {
		release := us(1000 + 100*i)
		it := linkItem{sent: release.Add(-1000 * time.Microsecond), release: release}
		w := written{start: release, n: size}
		if i > 0 {
			w.start = prev.end
		}
		w.end = w.start.Add(125 * time.Microsecond)
		s.add(it, w, prev)
		prev = w
	}
	if s.Frames != 100 || s.Bytes != 100*size {
		t.Errorf("frames %d bytes %d, want 100 and %d", s.Frames, s.Bytes, 100*size)
	}
	// Allowed lateness: 5% of 1000 µs = 50 µs; frame i is 25·i µs late: frames 3..99, all
	// held up by the transport, none let go late by the link itself.
	if s.Held != 97 || s.Late != 0 || s.MaxLate != 99*25*time.Microsecond {
		t.Errorf("held %d, late %d (max %v), want 97, 0 (max %v)", s.Held, s.Late, s.MaxLate, 99*25*time.Microsecond)
	}
	if r := s.CarriedRate(); math.Abs(r-1e9) > 1 {
		t.Errorf("carried rate %g bytes/s, want 1e9 (8 Gbit/s)", r)
	}
	w := s.Warning(1.25e9, "unix")
	for _, part := range []string{"97 of 100 frames were held up by the unix transport", "2.475ms", "carried only 8 Gbit/s", "below the 10 Gbit/s asked"} {
		if !strings.Contains(w, part) {
			t.Errorf("warning %q lacks %q", w, part)
		}
	}
	// With no bandwidth asked, a transport that queues frames is not the link's doing.
	if w := s.Warning(0, "unix"); w != "" {
		t.Errorf("no bandwidth: warning %q", w)
	}
	// A transport as fast as asked: no transport warning either.
	if w := s.Warning(1e9, "unix"); w != "" {
		t.Errorf("transport as fast as asked: warning %q", w)
	}

	// Frames the link let go late itself (a late wake-up), not held by the transport.
	var wake Stats
	for i := 0; i < 100; i++ {
		release := us(1000 * (i + 1))
		it := linkItem{sent: release.Add(-100 * time.Microsecond), release: release}
		late := time.Duration(0)
		if i%10 == 0 {
			late = 30 * time.Microsecond // allowed: 20 µs
		}
		wake.add(it, written{start: release.Add(late), end: release.Add(late + 10*time.Microsecond), n: 100}, written{})
	}
	if wake.Late != 10 || wake.Held != 0 {
		t.Errorf("late %d held %d, want 10 and 0", wake.Late, wake.Held)
	}
	// The hand-over lateness: the link's own part only. The held frames above left right when
	// the write before them ended: 0 each. Here 90 frames on time and 10 of them 30 µs late.
	if h := s.HandOver; h.Count() != 100 || h.Max() != 0 || h.Quantile(0.99) != 0 {
		t.Errorf("held frames: hand-over count %d max %v p99 %v, want 100, 0, 0", h.Count(), h.Max(), h.Quantile(0.99))
	}
	if h := wake.HandOver; h.Count() != 100 || h.Max() != 30*time.Microsecond ||
		h.Quantile(0.5) != 125*time.Nanosecond || h.Quantile(0.95) != 30*time.Microsecond {
		t.Errorf("late wake-ups: hand-over count %d max %v p50 %v p95 %v, want 100, 30µs, 125ns, 30µs",
			h.Count(), h.Max(), h.Quantile(0.5), h.Quantile(0.95))
	}
	if w := wake.Warning(0, "unix"); !strings.Contains(w, "10 of 100 frames left the emulated link late, up to 30µs") || !strings.Contains(w, "woke the link late") {
		t.Errorf("warning %q, want the machine blamed", w)
	}
	// 5% late or fewer: no warning.
	if w := (Stats{Frames: 100, Late: 5}).Warning(1e9, "unix"); w != "" {
		t.Errorf("5 late of 100: warning %q", w)
	}
	if w := (Stats{Frames: 100, Late: 6}).Warning(1e9, "unix"); w == "" {
		t.Error("6 late of 100: no warning")
	}
}

// Lateness's quantiles: within 125 ns below 64 µs, the middle of a doubling above, never
// above the largest duration counted; negative durations count as 0.
func TestLateness(t *testing.T) {
	us := func(f float64) time.Duration { return time.Duration(f * 1e3) }
	var h Lateness
	if h.Quantile(0.5) != 0 || h.Count() != 0 || h.Max() != 0 {
		t.Errorf("empty: p50 %v count %d max %v, want zeros", h.Quantile(0.5), h.Count(), h.Max())
	}
	h.add(-time.Microsecond)
	for i := 1; i <= 97; i++ {
		h.add(us(float64(i) / 2)) // 0.5 to 48.5 µs
	}
	h.add(us(100))    // [64, 128) µs
	h.add(us(100000)) // 100 ms: [65.5, 131) ms
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0, us(0.125)},     // the negative one, counted as 0
		{0.5, us(24.625)},  // rank 50: 24.5 µs, in [24.5, 24.75)
		{0.97, us(48.125)}, // rank 97: 48 µs
		{0.99, us(96)},     // rank 99: 100 µs, in [64, 128)
		{1, us(98304)},     // rank 100: 100 ms, in [65.536, 131.072) ms
	} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("Quantile(%g) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if h.Count() != 100 || h.Max() != us(100000) {
		t.Errorf("count %d max %v, want 100 and 100ms", h.Count(), h.Max())
	}
	// A quantile in a wide bucket is held to the largest duration; beyond the last bucket,
	// durations count in it.
	var one Lateness
	one.add(70 * time.Microsecond)
	one.add(time.Hour)
	if got := one.Quantile(0); got != 96*time.Microsecond {
		t.Errorf("70µs: Quantile(0) = %v, want 96µs", got)
	}
	var small Lateness
	small.add(65 * time.Microsecond)
	if got := small.Quantile(0.5); got != 65*time.Microsecond {
		t.Errorf("one of 65µs: p50 %v, want 65µs (the largest, below the middle of its bucket)", got)
	}
	if one.counts[len(one.counts)-1] != 1 {
		t.Errorf("1h: last bucket holds %d, want 1", one.counts[len(one.counts)-1])
	}
}

// The frame copies a link keeps for reuse are bounded in bytes, and large ones are not kept.
func TestBufPool(t *testing.T) {
	var p bufPool
	for i := 0; i < 40; i++ {
		p.put(make([]byte, 1<<20))
	}
	if p.bytes != linkFreeBytes || len(p.bufs) != linkFreeBytes>>20 {
		t.Errorf("pool holds %d bytes in %d buffers, want at most %d", p.bytes, len(p.bufs), linkFreeBytes)
	}
	p.put(make([]byte, linkFreeMaxBytes+1))
	if p.bytes != linkFreeBytes {
		t.Errorf("a frame over %d bytes was kept", linkFreeMaxBytes)
	}
	b := p.get(1000)
	if len(b) != 1000 || cap(b) != 1<<20 || p.bytes != linkFreeBytes-1<<20 {
		t.Errorf("get(1000): len %d cap %d, pool %d bytes", len(b), cap(b), p.bytes)
	}
	if b := p.get(2 << 20); len(b) != 2<<20 {
		t.Errorf("get(2 MiB) from a pool of 1 MiB buffers: len %d", len(b))
	}
}

func TestFormatRate(t *testing.T) {
	for bps, want := range map[float64]string{MaxBandwidth: "1 Tbit/s", 1.25e9: "10 Gbit/s", 1.2336e9: "9.869 Gbit/s", 124.99e9: "999.9 Gbit/s", 1e9: "8 Gbit/s", 12.5e6: "100 Mbit/s", 125: "1 kbit/s", 10: "80 bit/s"} {
		if got := FormatRate(bps); got != want {
			t.Errorf("FormatRate(%g) = %q, want %q", bps, got, want)
		}
	}
}

// slowFrames is a transport that takes pause to write each frame and receives nothing.
type slowFrames struct {
	pause  time.Duration
	closed chan struct{}
}

func (f *slowFrames) WriteFrame([]byte) error { time.Sleep(f.pause); return nil }
func (f *slowFrames) ReadFrame() ([]byte, error) {
	<-f.closed
	return nil, net.ErrClosed
}
func (f *slowFrames) Close() error { close(f.closed); return nil }

// A transport slower than the asked bandwidth makes the link warn, naming the rate the
// transport carried (a busier machine only makes the transport slower still).
func TestWarnsSlowTransport(t *testing.T) {
	// 10 KB frames at 10 MB/s take 1 ms each on the link; the transport takes at least 5.
	l := New(&slowFrames{pause: 5 * time.Millisecond, closed: make(chan struct{})}, 0, 0, 10e6, 1)
	frame := make([]byte, 10000)
	for i := 0; i < 20; i++ {
		if err := l.WriteFrame(frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil { // delivers every frame first
		t.Fatal(err)
	}
	tx, _ := l.Stats()
	if tx.Frames != 20 || tx.Held < 15 {
		t.Errorf("%d frames, %d held up: want 20, most of them held up", tx.Frames, tx.Held)
	}
	if r := tx.CarriedRate(); r <= 0 || r > 2.1e6 {
		t.Errorf("carried rate %g bytes/s, want at most 2e6 (10 KB per 5 ms)", r)
	}
	w := l.Warnings("unix")
	if len(w) != 1 || !strings.HasPrefix(w[0], "sent: ") || !strings.Contains(w[0], "held up by the unix transport") || !strings.Contains(w[0], "below the 80 Mbit/s asked") {
		t.Errorf("warnings %q, want one naming the unix transport's rate", w)
	}
}

// recordFrames is a transport that keeps a copy of every frame written to it.
type recordFrames struct {
	mu     sync.Mutex
	got    [][]byte
	closed chan struct{}
}

func (f *recordFrames) WriteFrame(b []byte) error {
	f.mu.Lock()
	f.got = append(f.got, append([]byte(nil), b...))
	f.mu.Unlock()
	return nil
}
func (f *recordFrames) ReadFrame() ([]byte, error) {
	<-f.closed
	return nil, net.ErrClosed
}
func (f *recordFrames) Close() error { close(f.closed); return nil }

// WriteOwned hands frames over without a copy: what the transport gets is what was written,
// in order, although the caller builds each next frame in the buffer WriteOwned returned
// (never one still in the link).
func TestWriteOwned(t *testing.T) {
	rec := &recordFrames{closed: make(chan struct{})}
	l := New(rec, 50*time.Microsecond, 0, 1e9, 1)
	buf := make([]byte, 0, 64<<10)
	var want [][]byte
	for i := 0; i < 200; i++ {
		frame := buf[:1000+i*100]
		for j := range frame {
			frame[j] = byte(i + j)
		}
		want = append(want, append([]byte(nil), frame...))
		next, err := l.WriteOwned(frame)
		if err != nil {
			t.Fatal(err)
		}
		if cap(next) < cap(frame) || len(next) != 0 {
			t.Fatalf("frame %d: next buffer len %d cap %d, want empty with cap ≥ %d", i, len(next), cap(next), cap(frame))
		}
		buf = next
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != len(want) {
		t.Fatalf("transport got %d frames, want %d", len(rec.got), len(want))
	}
	for i := range want {
		if !bytes.Equal(rec.got[i], want[i]) {
			t.Fatalf("frame %d arrived changed", i)
		}
	}
	if _, err := l.WriteOwned(buf[:10]); err == nil {
		t.Error("WriteOwned after Close: no error")
	}
}

// A frame larger than the link keeps (a weight upload) does not make every later frame's
// buffer that large: the link would drop each such buffer after writing it and allocate the
// next afresh, hundreds of MB of garbage per venusd run whose collections made the link's
// sender hundreds of µs late. After one large frame, small frames reuse the link's buffers.
func TestWriteOwnedLargeFrameCapacity(t *testing.T) {
	l := New(discardFrames{closed: make(chan struct{})}, 0, 0, 1e12, 1)
	defer l.Close()
	next, err := l.WriteOwned(make([]byte, 100, 2*linkFreeMaxBytes))
	if err != nil {
		t.Fatal(err)
	}
	if cap(next) > linkFreeMaxBytes {
		t.Fatalf("after a frame of capacity %d: next buffer capacity %d, want at most %d", 2*linkFreeMaxBytes, cap(next), linkFreeMaxBytes)
	}
	frame := next[:1000]
	allocs := testing.AllocsPerRun(100, func() {
		n, err := l.WriteOwned(frame)
		if err != nil {
			t.Fatal(err)
		}
		// The sender returns the frame written to the pool. Unless that happened before
		// WriteOwned took n (then n is that frame), waiting for it makes the count independent
		// of how the goroutines are scheduled: a writer that runs ahead of the sender
		// allocates whatever the buffers' capacity.
		if &n[:1][0] != &frame[0] && !waitKept(l, 1, 10*time.Second) {
			t.Fatal("the link kept no buffer of the frames it wrote")
		}
		frame = n[:1000]
	})
	// In steady state the buffer written comes back and the next frame reuses it: a buffer
	// the link would not keep (capacity over linkFreeMaxBytes) makes this 1.
	if allocs > 0.5 {
		t.Errorf("%.1f allocations per small frame after a large one, want 0", allocs)
	}
}

// waitKept waits up to timeout until the link's send pool holds at least n buffers; it
// reports whether it did.
func waitKept(l *Link, n int, timeout time.Duration) bool {
	for end := time.Now().Add(timeout); time.Now().Before(end); runtime.Gosched() {
		l.freeTx.mu.Lock()
		k := len(l.freeTx.bufs)
		l.freeTx.mu.Unlock()
		if k >= n {
			return true
		}
	}
	return false
}

// discardFrames is a transport that drops what is written to it, without allocating.
type discardFrames struct{ closed chan struct{} }

func (f discardFrames) WriteFrame([]byte) error { return nil }
func (f discardFrames) ReadFrame() ([]byte, error) {
	<-f.closed
	return nil, net.ErrClosed
}
func (f discardFrames) Close() error { close(f.closed); return nil }

// TestCloseWhileWriting closes a link while other goroutines write to it: every write either
// is delivered or returns an error, and none sends on the closed queue (which would panic).
func TestCloseWhileWriting(t *testing.T) {
	for round := 0; round < 50; round++ {
		rec := &recordFrames{closed: make(chan struct{})}
		l := New(rec, 0, 0, 0, 1)
		var wg sync.WaitGroup
		var ok atomic.Int64
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				frame := make([]byte, 64)
				for i := 0; i < 200; i++ {
					if l.WriteFrame(frame) != nil {
						return
					}
					ok.Add(1)
				}
			}()
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if got := int64(len(rec.got)); got != ok.Load() {
			t.Fatalf("round %d: %d writes succeeded, the transport got %d frames", round, ok.Load(), got)
		}
	}
}
