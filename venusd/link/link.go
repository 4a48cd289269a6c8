// Package link emulates a network link between venusd's client and server (the kernel of the
// machines perflab was built on has no netem): each frame is delivered a delay (plus jitter)
// after it was sent, serialised at a bandwidth, in order, in each direction. Its sleeps wake
// within a few µs of their deadline (a timerfd, then a spin).
package link

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Frames moves whole frames (header included) over a transport.
type Frames interface {
	// WriteFrame sends frame; the caller may reuse frame when it returns.
	WriteFrame(frame []byte) error
	// ReadFrame returns the next frame, header included, valid until the next call.
	ReadFrame() ([]byte, error)
	Close() error
}

// Link emulates a network link on top of Frames: each frame is delivered Delay (plus
// jitter) after it was sent, after being serialised at Bandwidth, in order, in each direction.
// The kernel of this machine has no netem; this stands in for it.
//
// Its bandwidth is a token bucket of one frame: each direction keeps the time its
// serialisation is busy until, and a frame starts serialising at that time or when it is sent,
// whichever is later. So deadlines follow from the first frame of a busy stretch, never from
// when a sleep returned, and an idle link accumulates no credit to burst with later.
type Link struct {
	d             Frames
	delay, jitter time.Duration
	bw            float64          // bytes/s, 0 unlimited
	now           func() time.Time // the clock of arrival times (time.Now; tests inject one)

	mu      sync.Mutex
	closed  bool
	sending sync.WaitGroup // frames between enter and their hand-over to tx; Close waits for them
	rng     *rand.Rand
	txPace  pace
	txErr   error
	txStats Stats
	rxStats Stats
	tx      chan linkItem
	rx      chan linkItem
	txDone  chan struct{}
	rxDone  chan struct{}
	stop    chan struct{}
	rxErr   error  // sticky; touched only by the one reader
	rxPrev  []byte // the frame readFrame returned last, recycled at the next call

	// freeTx and freeRx hold frame copies for reuse: a fresh multi-megabyte copy per frame
	// costs page faults and garbage collections that delay the sender past its deadline at
	// 1-10 Gbit/s.
	freeTx, freeRx bufPool
}

// Link buffer recycling: each direction keeps at most linkFreeBytes of frame copies (a
// pipeline of 8 frames of 1 MiB in flight, or 4 of the largest kept frame), and none larger
// than linkFreeMaxBytes, so that a large frame does not keep its memory.
const (
	linkFreeBytes    = 16 << 20
	linkFreeMaxBytes = 4 << 20
)

// bufPool keeps frame copies for reuse, at most linkFreeBytes of them.
type bufPool struct {
	mu    sync.Mutex
	bufs  [][]byte
	bytes int
}

// get returns a buffer of n bytes, a kept one when one is large enough.
func (p *bufPool) get(n int) []byte {
	p.mu.Lock()
	for i := len(p.bufs) - 1; i >= 0; i-- {
		if b := p.bufs[i]; cap(b) >= n {
			p.bufs[i] = p.bufs[len(p.bufs)-1]
			p.bufs = p.bufs[:len(p.bufs)-1]
			p.bytes -= cap(b)
			p.mu.Unlock()
			return b[:n]
		}
	}
	p.mu.Unlock()
	return make([]byte, n)
}

// put keeps b for reuse if it is small enough and the pool has room.
func (p *bufPool) put(b []byte) {
	if b == nil || cap(b) > linkFreeMaxBytes {
		return
	}
	p.mu.Lock()
	if p.bytes+cap(b) <= linkFreeBytes {
		p.bufs = append(p.bufs, b)
		p.bytes += cap(b)
	}
	p.mu.Unlock()
}

type linkItem struct {
	b       []byte
	sent    time.Time // when the frame entered the link
	release time.Time // when it leaves
	err     error
}

// New starts a link on d: delay and jitter in each direction, bandwidth bw in bytes/s (0
// unlimited), the jitter drawn from a generator seeded with seed. Close stops it.
func New(d Frames, delay, jitter time.Duration, bw float64, seed uint64) *Link {
	l := &Link{d: d, delay: delay, jitter: jitter, bw: bw, now: time.Now, rng: rand.New(rand.NewPCG(seed, 0x5656)),
		tx: make(chan linkItem, 4096), rx: make(chan linkItem, 4096), txDone: make(chan struct{}), rxDone: make(chan struct{}), stop: make(chan struct{})}
	go l.sender()
	go l.receiver()
	return l
}

// pace is the state of one direction of a link.
type pace struct {
	busy  time.Time // when the serialisation of the frames sent so far ends
	last  time.Time // when the last frame arrives
	start time.Time // when the current busy stretch began
	bytes int64     // bytes serialised since start
}

// arrival computes when a frame of n bytes sent at now arrives, p being the state of its
// direction. A frame sent while the link is busy ends its serialisation at the stretch's start
// plus all the stretch's bytes at the bandwidth, so rounding to nanoseconds never accumulates
// (a 72-byte frame takes 57.6 ns at 10 Gbit/s). The caller holds l.mu.
func (l *Link) arrival(now time.Time, n int, p *pace) time.Time {
	if !p.busy.After(now) {
		p.start, p.bytes = now, 0 // idle: a new stretch, with no credit saved up
	}
	p.bytes += int64(n)
	end := now
	if l.bw > 0 {
		end = p.start.Add(time.Duration(float64(p.bytes) / l.bw * 1e9))
	}
	p.busy = end
	at := end.Add(l.delay)
	if l.jitter > 0 {
		at = at.Add(time.Duration(l.rng.Int64N(int64(l.jitter))))
	}
	if at.Before(p.last) {
		at = p.last
	}
	p.last = at
	return at
}

// WriteFrame queues frame for delivery when the link would have carried it.
func (l *Link) WriteFrame(frame []byte) error {
	now, at, err := l.enter(len(frame))
	if err != nil {
		return err
	}
	b := l.freeTx.get(len(frame))
	copy(b, frame)
	l.tx <- linkItem{b: b, sent: now, release: at}
	l.sending.Done()
	return nil
}

// WriteOwned is WriteFrame without its copy, which at 10 Gbit/s costs as much CPU as the
// transport's own: the link keeps frame until it has written it, and the caller must not
// touch frame after a call that returned no error. It returns an empty buffer for the caller
// to build its next frame in (a recycled one when the link has one), with frame's capacity up
// to linkFreeMaxBytes: a frame that once grew past what the link keeps (a weight upload) must
// not make every later frame's buffer that large, since the link would then drop each one
// after writing it and allocate the next afresh (hundreds of MB of garbage per run, whose
// collections delayed the link's sender by hundreds of µs); after an error, frame[:0].
func (l *Link) WriteOwned(frame []byte) ([]byte, error) {
	now, at, err := l.enter(len(frame))
	if err != nil {
		return frame[:0], err
	}
	l.tx <- linkItem{b: frame, sent: now, release: at}
	l.sending.Done()
	return l.freeTx.get(min(cap(frame), linkFreeMaxBytes))[:0], nil
}

// enter times a frame of n bytes entering the link now: when it was sent and when it leaves.
// Without an error, the caller hands the frame to tx and then calls l.sending.Done, so that a
// Close from another goroutine never closes tx under a frame on its way in.
func (l *Link) enter(n int) (now, at time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return now, at, net.ErrClosed
	}
	if l.txErr != nil {
		return now, at, l.txErr
	}
	now = l.now()
	l.sending.Add(1)
	return now, l.arrival(now, n, &l.txPace), nil
}

// Link limits: values outside them are refused (Validate), so that a typo cannot make a run
// hang for years or overflow the arithmetic of arrival times.
const (
	MaxDelay     = 10 * time.Second // largest delay and jitter
	MinBandwidth = 1e3 / 8          // smallest bandwidth, bytes/s (1 kbit/s)
	MaxBandwidth = 1e12 / 8         // largest bandwidth, bytes/s (1 Tbit/s)
)

// Validate checks an emulated link's parameters: delay and jitter from 0 to MaxDelay,
// bandwidth (bytes/s) 0 (unlimited) or from MinBandwidth to MaxBandwidth. Its errors
// name the parameter and the allowed range.
func Validate(delay, jitter time.Duration, bandwidth float64) error {
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("delay %v: want 0 to %v", delay, MaxDelay)
	}
	if jitter < 0 || jitter > MaxDelay {
		return fmt.Errorf("jitter %v: want 0 to %v", jitter, MaxDelay)
	}
	if bandwidth != 0 && !(bandwidth >= MinBandwidth && bandwidth <= MaxBandwidth) {
		return fmt.Errorf("bandwidth %g bytes/s: want 0 (unlimited) or 1kbit/s to 1Tbit/s", bandwidth)
	}
	return nil
}

// SleepUntil sleeps on a timer until SpinMargin before its deadline and spins the rest. The Go
// runtime's timers wake from epoll_wait, whose timeout has millisecond resolution:
// time.Sleep(100µs) sleeps about 1.1 ms on this VM, time.Sleep(1.5ms) 2.2 ms. A timerfd armed
// for the deadline and read through the runtime's poller wakes the goroutine 25-45 µs late
// (median, idle VM) without holding a processor while it waits, as nanosleep(2) would, but on
// a loaded machine a wake-up can take much longer. So the margin is measured: it is the
// largest lateness of the timer's last wakeWindow wake-ups in this process, plus half of it,
// plus minSpin, held between minSpin and maxSpin (maxSpin until wakeWindow wake-ups were seen).
// A fixed 60 µs measured worse than 200 µs under load (BenchmarkLinkAccuracy); a measured one
// grows to maxSpin there. The spin is the link's CPU cost: at most maxSpin for each frame (the
// whole wait for a frame due sooner), none for a frame already due (no delay, jitter or
// bandwidth: venusd then makes no link at all).
const (
	maxSpin    = 200 * time.Microsecond
	minSpin    = 20 * time.Microsecond
	wakeWindow = 64
)

// wakes holds how late the timer's latest wake-ups were, and the spin margin they make.
var wakes struct {
	mu     sync.Mutex
	late   [wakeWindow]time.Duration // a ring
	next   int
	seen   int
	margin atomic.Int64 // ns; 0: maxSpin
}

// SpinMargin is how long before a deadline SleepUntil stops sleeping and spins now.
func SpinMargin() time.Duration {
	if m := wakes.margin.Load(); m > 0 {
		return time.Duration(m)
	}
	return maxSpin
}

// noteWake counts a timer wake-up late by late, and sets the spin margin from the last
// wakeWindow of them.
func noteWake(late time.Duration) {
	wakes.mu.Lock()
	defer wakes.mu.Unlock()
	wakes.late[wakes.next] = max(late, 0)
	wakes.next = (wakes.next + 1) % wakeWindow
	if wakes.seen++; wakes.seen < wakeWindow {
		return
	}
	worst := time.Duration(0)
	for _, l := range wakes.late {
		worst = max(worst, l)
	}
	wakes.margin.Store(int64(min(maxSpin, max(minSpin, worst+worst/2+minSpin))))
}

// preciseTimer is a timerfd read through the runtime's poller.
type preciseTimer struct {
	f  *os.File
	fd int
}

// timers keeps idle timerfds for reuse; the ones beyond its capacity are closed.
var timers = make(chan *preciseTimer, 64)

func getTimer() *preciseTimer {
	select {
	case t := <-timers:
		return t
	default:
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	return &preciseTimer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
}

func putTimer(t *preciseTimer) {
	select {
	case timers <- t:
	default:
		t.f.Close()
	}
}

// sleep waits d on the timer; it reports false when the timer failed.
//
// The read also has a deadline d away, which is a Go timer: whichever comes first ends the
// sleep. A timerfd is read through the runtime's poller, which a busy process polls only when
// a processor runs out of goroutines, or from sysmon every 10 ms: while goroutines yield in a
// loop on every processor (an shm ring polling, another link's spin), the timerfd's wake-up
// waited up to 10 ms. The runtime checks its timers at every scheduling instead, so the
// deadline fires on time in a busy process; in an idle one the timerfd does, where the Go
// timer would wait for epoll_wait's millisecond.
func (t *preciseTimer) sleep(d time.Duration) bool {
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if unix.TimerfdSettime(t.fd, 0, &its, nil) != nil {
		return false
	}
	deadline := t.f.SetReadDeadline(time.Now().Add(d)) == nil
	var b [8]byte
	_, err := t.f.Read(b[:])
	if deadline && errors.Is(err, os.ErrDeadlineExceeded) {
		return true // the timerfd, rearmed by the next sleep, forgets this expiry
	}
	return err == nil
}

// SleepUntil returns at t: within a few µs when the machine has a free core (see SpinMargin
// and BenchmarkLinkAccuracy).
func SleepUntil(t time.Time) {
	margin := SpinMargin()
	if d := time.Until(t); d > margin {
		wake := t.Add(-margin)
		tm := getTimer()
		if tm != nil && tm.sleep(d-margin) {
			noteWake(time.Since(wake))
			putTimer(tm)
		} else {
			if tm != nil {
				tm.f.Close()
			}
			// No timerfd: a Go timer, which may be late by up to a millisecond.
			time.Sleep(time.Until(wake))
		}
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

func (l *Link) sender() {
	defer close(l.txDone)
	var prev written
	for it := range l.tx {
		SleepUntil(it.release)
		w := written{start: time.Now(), n: len(it.b)}
		err := l.d.WriteFrame(it.b)
		w.end = time.Now()
		l.mu.Lock()
		if err != nil {
			l.txErr = err
		}
		l.txStats.add(it, w, prev)
		l.mu.Unlock()
		prev = w
		l.freeTx.put(it.b)
	}
}

func (l *Link) receiver() {
	defer close(l.rxDone)
	var p pace
	for {
		b, err := l.d.ReadFrame()
		if err != nil {
			select {
			case l.rx <- linkItem{err: err}:
			case <-l.stop:
			}
			return
		}
		c := l.freeRx.get(len(b))
		copy(c, b)
		l.mu.Lock()
		now := l.now()
		at := l.arrival(now, len(c), &p)
		l.mu.Unlock()
		select {
		case l.rx <- linkItem{b: c, sent: now, release: at}:
		case <-l.stop:
			return
		}
	}
}

// ReadFrame returns the next frame once the link would have delivered it.
func (l *Link) ReadFrame() ([]byte, error) {
	l.freeRx.put(l.rxPrev) // the caller is done with it
	l.rxPrev = nil
	if l.rxErr != nil {
		return nil, l.rxErr
	}
	var it linkItem
	select {
	case it = <-l.rx:
	case <-l.rxDone:
		select {
		case it = <-l.rx:
		default:
			it.err = net.ErrClosed
		}
	}
	if it.err != nil {
		l.rxErr = it.err
		return nil, it.err
	}
	waited := time.Now().Before(it.release)
	SleepUntil(it.release)
	if waited { // a frame the caller came for after its time: any lateness is the caller's
		w := written{start: time.Now(), n: len(it.b)}
		w.end = w.start
		l.mu.Lock()
		l.rxStats.add(it, w, written{})
		l.mu.Unlock()
	}
	l.rxPrev = it.b
	return it.b, nil
}

// Close delivers the frames already sent, then closes the transport.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.sending.Wait() // no frame enters after closed is set; those already in are handed over
	close(l.tx)
	<-l.txDone // frames already sent are delivered first
	close(l.stop)
	err := l.d.Close()
	<-l.rxDone
	return err
}
