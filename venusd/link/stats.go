package link

import (
	"fmt"
	"time"
)

// Stats are what one direction of a link did: the frames that left it, those it let go later
// than allowed, those the transport held up, and how fast the transport took frames that were
// already due.
type Stats struct {
	Frames int64 // frames that left the link
	Bytes  int64 // their bytes, headers included
	// Late counts the frames the link itself let go more than LateAllowance after they could
	// have left (their time, or the end of the previous frame's write when that was later): a
	// late wake-up. Held counts the frames that were due before the previous frame's write
	// ended and left more than LateAllowance after their time: the transport held them up, as
	// it would have without the link. MaxLate is the largest lateness of any frame.
	Late    int64
	Held    int64
	MaxLate time.Duration
	// BacklogBytes and BacklogTime cover the frames whose successor was already due when their
	// write to the transport ended: their bytes, and the time from the start of each one's
	// write to the start of the next one's. Their ratio is the rate the transport took the
	// link's frames at while the link had more to send (CarriedRate).
	BacklogBytes int64
	BacklogTime  time.Duration
	// HandOver is how long after it could have left the link let each frame go (the same
	// lateness Late counts, 0 for a frame on time): the link's own accuracy, apart from how
	// fast the peer then takes the frame.
	HandOver Lateness
}

// Lateness is a histogram of durations of 0 and more: 250 ns buckets up to 64 µs, then one
// bucket per doubling up to about 70 s (larger ones in the last bucket). Its quantiles are
// within 125 ns below 64 µs and within a factor of 1.5 above.
type Lateness struct {
	n      int64
	max    time.Duration
	counts [latLinear + latLog]int64
}

const (
	latStep   = 250 * time.Nanosecond
	latLinear = 256 // buckets of latStep: up to 64 µs
	latLog    = 21  // buckets [64 µs·2^k, 64 µs·2^(k+1))
)

// add counts one duration; negative ones count as 0.
func (h *Lateness) add(d time.Duration) {
	d = max(d, 0)
	h.n++
	h.max = max(h.max, d)
	i := int(d / latStep)
	if i >= latLinear {
		k := 0
		for top := 2 * latLinear * latStep; d >= top && k < latLog-1; top *= 2 {
			k++
		}
		i = latLinear + k
	}
	h.counts[i]++
}

// Count is the number of durations counted.
func (h *Lateness) Count() int64 { return h.n }

// Max is the largest duration counted (exact), 0 when none were.
func (h *Lateness) Max() time.Duration { return h.max }

// Quantile returns the q quantile (0 to 1) of the durations counted, as the middle of its
// bucket or the largest duration counted, whichever is smaller; 0 when none were.
func (h *Lateness) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(q*float64(h.n-1)) + 1 // nearest rank, 1-based
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			mid := time.Duration(i)*latStep + latStep/2
			if i >= latLinear {
				lo := latLinear * latStep << (i - latLinear)
				mid = lo + lo/2
			}
			return min(mid, h.max)
		}
	}
	return 0 // not reached: the counts sum to n
}

// written is one frame handed to the transport: when the write started and ended, its bytes.
type written struct {
	start, end time.Time
	n          int
}

// LateAllowance is how late a frame may leave the link, having been asked to spend inLink in
// it (delay, jitter, serialisation and the wait behind earlier frames): 5% of inLink or 20 µs,
// whichever is larger, the accuracy docs/venusd.md measures.
func LateAllowance(inLink time.Duration) time.Duration {
	return max(20*time.Microsecond, inLink/20)
}

// add counts frame it, written as w to the transport right after prev (zero for the first
// frame, or where no transport write is involved).
func (s *Stats) add(it linkItem, w, prev written) {
	s.Frames++
	s.Bytes += int64(w.n)
	allowed := LateAllowance(it.release.Sub(it.sent))
	late := w.start.Sub(it.release)
	s.MaxLate = max(s.MaxLate, late)
	if prev.n > 0 && !it.release.After(prev.end) {
		// Due before the previous write ended: the transport held this frame up.
		s.BacklogBytes += int64(prev.n)
		s.BacklogTime += w.start.Sub(prev.start)
		if late > allowed {
			s.Held++
		}
		late = w.start.Sub(prev.end) // the link's own part
	}
	s.HandOver.add(late)
	if late > allowed {
		s.Late++
	}
}

// minBacklog is the least backlog time CarriedRate reads a rate from.
const minBacklog = time.Millisecond

// CarriedRate is the rate, in bytes/s, the transport took frames at while the link had more
// due (0 when it never had for at least a millisecond in all).
func (s Stats) CarriedRate() float64 {
	if s.BacklogTime < minBacklog {
		return 0
	}
	return float64(s.BacklogBytes) / s.BacklogTime.Seconds()
}

// Warning says, in one line, why the frames of this direction cannot be trusted to have
// kept to the link asked for, with bandwidth bw (bytes/s, 0 unlimited) over the named
// transport; "" when they can. It names the transport when, with a bandwidth, more than 5% of
// the frames were held up by a transport that carried less than 95% of bw; else the machine,
// when the link itself let more than 5% of them go late. A transport that holds frames up with
// no bandwidth asked is only queueing as it would without the link: no warning.
func (s Stats) Warning(bw float64, transport string) string {
	if r := s.CarriedRate(); bw > 0 && s.Held*20 > s.Frames && r > 0 && r < 0.95*bw {
		return fmt.Sprintf("%d of %d frames were held up by the %s transport, up to %v late (allowed: 5%% of their time in the link or 20µs): it carried only %s while frames waited, below the %s asked; the link cannot emulate a rate above what its transport, with the CPU it gets, carries",
			s.Held, s.Frames, transport, s.MaxLate.Round(time.Microsecond), FormatRate(r), FormatRate(bw))
	}
	if s.Late*20 > s.Frames {
		return fmt.Sprintf("%d of %d frames left the emulated link late, up to %v (allowed: 5%% of their time in the link or 20µs): the machine woke the link late (CPUs busy?); delays and rates in this run are longer than asked",
			s.Late, s.Frames, s.MaxLate.Round(time.Microsecond))
	}
	return ""
}

// FormatRate writes a rate given in bytes/s in bits per second, to four digits: "9.869 Gbit/s".
func FormatRate(bytesPerS float64) string {
	b := bytesPerS * 8
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.4g Tbit/s", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.4g Gbit/s", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.4g Mbit/s", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.4g kbit/s", b/1e3)
	}
	return fmt.Sprintf("%.4g bit/s", b)
}

// Stats returns what each direction did so far: tx the frames sent, rx the frames received
// (only those the caller was waiting for when they were due: a frame read after its time was
// not held up by the link).
func (l *Link) Stats() (tx, rx Stats) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.txStats, l.rxStats
}

// Warnings gives a line for each direction whose frames did not keep to the link (Warning),
// naming the transport under it.
func (l *Link) Warnings(transport string) []string {
	tx, rx := l.Stats()
	var out []string
	if w := tx.Warning(l.bw, transport); w != "" {
		out = append(out, "sent: "+w)
	}
	if w := rx.Warning(l.bw, transport); w != "" {
		out = append(out, "received: "+w)
	}
	return out
}
