package analyzers

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"unsafe"
)

// Past the record budget, the blocked and receive intervals are in temporary files in the
// order they came, not in time order, and the server's share of a span needs their unions. They
// are sorted outside memory: one pass over each list cuts it into sorted runs of up to runLen
// intervals (each merged into disjoint ones) written to another unlinked temporary file, runs
// are merged runFanIn at a time until at most runFanIn are left, and the last merge is read
// once, with the spans' ends in time order, to sum the busy time before each end.
var (
	runLen   = 1 << 20 // the most intervals sorted in memory at a time (16 MiB; less under a smaller budget)
	runFanIn = 16      // runs merged at a time
)

const runBuf = 4096 // intervals read or written at a time per run

// runSet is a temporary file of runs, each a sorted list of disjoint intervals.
type runSet struct {
	f    *os.File
	runs [][2]int64 // each run's first interval and its count
	n    int64      // intervals in the file
	out  []interval // write buffer
	cur  interval   // the interval being merged into, not yet written (have)
	have bool
	err  error
}

func newRunSet() (*runSet, error) {
	f, err := os.CreateTemp("", "perflab-analyze-runs-*")
	if err != nil {
		return nil, fmt.Errorf("create run file: %w", err)
	}
	os.Remove(f.Name()) // unlinked: the space is freed when it is closed
	return &runSet{f: f, out: make([]interval, 0, runBuf)}, nil
}

// add appends iv to the run being written; intervals must come sorted by start. Overlapping or
// touching ones are merged.
func (s *runSet) add(iv interval) {
	if s.have && iv.from <= s.cur.to {
		s.cur.to = max(s.cur.to, iv.to)
		return
	}
	if s.have {
		s.put(s.cur)
	}
	s.cur, s.have = iv, true
}

func (s *runSet) put(iv interval) {
	s.out = append(s.out, iv)
	if len(s.out) == cap(s.out) {
		s.flush()
	}
}

func (s *runSet) flush() {
	if len(s.out) > 0 && s.err == nil {
		if _, err := s.f.WriteAt(asBytes(s.out), s.n*int64(unsafe.Sizeof(interval{}))); err != nil {
			s.err = fmt.Errorf("write run file: %w", err)
		}
		s.n += int64(len(s.out))
	}
	s.out = s.out[:0]
}

// endRun ends the run being written.
func (s *runSet) endRun() {
	if s.have {
		s.put(s.cur)
		s.have = false
	}
	s.flush()
	start := int64(0)
	if k := len(s.runs); k > 0 {
		start = s.runs[k-1][0] + s.runs[k-1][1]
	}
	if s.n > start {
		s.runs = append(s.runs, [2]int64{start, s.n - start})
	}
}

func (s *runSet) close() {
	if s != nil && s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// runReader reads one run in order.
type runReader struct {
	f        *os.File
	off, end int64 // next interval to read, end of the run
	buf      []interval
	k        int
	err      *error
}

func (r *runReader) next() (interval, bool) {
	if r.k == len(r.buf) {
		n := min(int64(cap(r.buf)), r.end-r.off)
		if n <= 0 || *r.err != nil {
			return interval{}, false
		}
		r.buf = r.buf[:n]
		if _, err := r.f.ReadAt(asBytes(r.buf), r.off*int64(unsafe.Sizeof(interval{}))); err != nil {
			*r.err = fmt.Errorf("read run file: %w", err)
			return interval{}, false
		}
		r.off += n
		r.k = 0
	}
	r.k++
	return r.buf[r.k-1], true
}

// unionReader yields the union of sorted runs as sorted, disjoint intervals.
type unionReader struct {
	rs    []*runReader
	heads []interval
	ok    []bool
}

func (s *runSet) reader(runs [][2]int64) *unionReader {
	u := &unionReader{}
	for _, r := range runs {
		rr := &runReader{f: s.f, off: r[0], end: r[0] + r[1], buf: make([]interval, 0, runBuf), err: &s.err}
		h, ok := rr.next()
		u.rs, u.heads, u.ok = append(u.rs, rr), append(u.heads, h), append(u.ok, ok)
	}
	return u
}

// first returns the index of the head that starts first, -1 when every run is done.
func (u *unionReader) first() int {
	k := -1
	for j := range u.rs {
		if u.ok[j] && (k < 0 || u.heads[j].from < u.heads[k].from) {
			k = j
		}
	}
	return k
}

func (u *unionReader) next() (interval, bool) {
	k := u.first()
	if k < 0 {
		return interval{}, false
	}
	cur := u.heads[k]
	for k >= 0 && u.heads[k].from <= cur.to {
		cur.to = max(cur.to, u.heads[k].to)
		u.heads[k], u.ok[k] = u.rs[k].next()
		k = u.first()
	}
	return cur, true
}

// sortedRuns sorts the non-empty intervals of l into at most runFanIn runs of sorted,
// disjoint intervals, reading l once.
func sortedRuns(l *spillList[interval]) (*runSet, error) {
	s, err := newRunSet()
	if err != nil {
		return nil, err
	}
	n := runLen
	if l.budget != nil && l.budget.limit >= 0 {
		// a quarter of the budget, but at least a read buffer's worth
		n = min(n, max(runBuf, int(l.budget.limit/4/int64(unsafe.Sizeof(interval{})))))
	}
	buf := make([]interval, 0, min(n, l.len()))
	cut := func() {
		slices.SortFunc(buf, func(x, y interval) int { return compareInt64(x.from, y.from) })
		for _, iv := range buf {
			s.add(iv)
		}
		s.endRun()
		buf = buf[:0]
	}
	for iv := range l.all() {
		if iv.to > iv.from {
			buf = append(buf, *iv)
			if len(buf) == n {
				cut()
			}
		}
	}
	cut()
	for len(s.runs) > runFanIn && s.err == nil {
		m, err := newRunSet()
		if err != nil {
			s.close()
			return nil, err
		}
		for g := 0; g < len(s.runs); g += runFanIn {
			u := s.reader(s.runs[g:min(g+runFanIn, len(s.runs))])
			for iv, ok := u.next(); ok; iv, ok = u.next() {
				m.add(iv)
			}
			m.endRun()
		}
		if s.err != nil {
			m.err = s.err
		}
		s.close()
		s = m
	}
	if s.err != nil {
		s.close()
		return nil, s.err
	}
	return s, nil
}

func compareInt64(x, y int64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// serverTimesSpilled sets out[k] to serverTimeIn(spans[k].from, spans[k].to) when the blocked
// or receive intervals have gone to the temporary files: it sorts each list outside memory
// (sortedRuns: one pass over each), then reads the busy times (the union of the blocked
// intervals less that of the receive intervals) once, in time order, against the spans' ends
// sorted, summing the busy time before each end.
func (a *analyzer) serverTimesSpilled(spans []interval, out []int64) error {
	waits, err := sortedRuns(&a.blocks)
	if err != nil {
		return err
	}
	defer waits.close()
	idle, err := sortedRuns(&a.srvRecv)
	if err != nil {
		return err
	}
	defer idle.close()
	if a.budget.readErr != nil {
		return a.budget.readErr
	}

	// the spans' ends, in time order
	type end struct {
		x int64
		k int32 // span k's start (k >= 0) or end (^k)
	}
	ends := make([]end, 0, 2*len(spans))
	for k, s := range spans {
		if s.to > s.from {
			ends = append(ends, end{s.from, int32(k)}, end{s.to, ^int32(k)})
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].x < ends[j].x })

	// the busy intervals in time order: each wait less the receive intervals within it
	w, r := waits.reader(waits.runs), idle.reader(idle.runs)
	ci, haveI := r.next()
	var pending []interval // busy intervals of the current wait not yet consumed
	wait, haveW := w.next()
	nextBusy := func() (interval, bool) {
		for len(pending) == 0 && haveW {
			for haveI && ci.to <= wait.from {
				ci, haveI = r.next()
			}
			at := wait.from
			for haveI && ci.from < wait.to {
				if ci.from > at {
					pending = append(pending, interval{at, ci.from})
				}
				at = max(at, ci.to)
				if ci.to > wait.to {
					break // it may cover part of the next wait too
				}
				ci, haveI = r.next()
			}
			if wait.to > at {
				pending = append(pending, interval{at, wait.to})
			}
			wait, haveW = w.next()
		}
		if len(pending) == 0 {
			return interval{}, false
		}
		b := pending[0]
		pending = pending[1:]
		return b, true
	}

	var cum int64 // busy ns before b
	b, haveB := nextBusy()
	for _, e := range ends {
		for haveB && b.to <= e.x {
			cum += b.to - b.from
			b, haveB = nextBusy()
		}
		v := cum
		if haveB && b.from < e.x {
			v += e.x - b.from
		}
		if e.k >= 0 {
			out[e.k] -= v
		} else {
			out[^e.k] += v
		}
	}
	if waits.err != nil {
		return waits.err
	}
	return idle.err
}
