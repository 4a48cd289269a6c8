package transport

import (
	"sync/atomic"
	"testing"
	"time"
)

// whenAsleep returns once r's reader has read read bytes and sleeps on its futex for more (its
// poll is over, missed).
func whenAsleep(r *ring, read uint64) {
	for atomic.LoadUint64(r.tail) != read || atomic.LoadUint32(r.dataW) == 0 {
		time.Sleep(20 * time.Microsecond)
	}
}

// A ring whose peer answers only after the poll has given up backs off: after shmBackoffAfter
// waits in a row that slept (or were caught late) it polls only briefly for shmBackoffWaits
// waits, then polls in full again. The peer writes only once the reader sleeps, so every wait
// misses, whatever the machine's load.
func TestShmBackOff(t *testing.T) {
	c, s := pair(t, "shm", DialOptions{ShmSpin: 2000})
	sc := c.(*shmConn)
	const slow = shmBackoffAfter + 4
	before := ShmWaits()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < slow; i++ {
			whenAsleep(sc.rx, uint64(i))
			s.Write([]byte{byte(i)})
		}
	}()
	buf := make([]byte, 1)
	c.SetReadDeadline(time.Now().Add(15 * time.Second))
	for i := 0; i < slow; i++ {
		if _, err := c.Read(buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("read %d: %v, byte %d", i, err, buf[0])
		}
	}
	<-done
	d := ShmWaits().Sub(before)
	if d.Waits < slow || d.Slept < slow || d.BackedOff < slow-shmBackoffAfter {
		t.Errorf("slow peer: waits %+v; want at least %d waits, all slept, %d backed off", d, slow, slow-shmBackoffAfter)
	}
	if want := shmBackoffWaits - (slow - shmBackoffAfter); sc.rx.backoff != want {
		t.Errorf("ring backoff %d after %d slow waits, want %d left", sc.rx.backoff, slow, want)
	}
	// The back-off runs out: the next wait is the last backed-off one, the one after polls in full.
	sc.rx.backoff = 1
	go func() { whenAsleep(sc.rx, slow); s.Write([]byte{1}) }()
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	if sc.rx.backoff != 0 {
		t.Errorf("backoff %d after the last backed-off wait, want 0", sc.rx.backoff)
	}
}
