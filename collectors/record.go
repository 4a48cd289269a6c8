package collectors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/perflab/perflab/trace"
)

// Source produces trace records: eBPF probes, an in-process tracer, a replay. Run emits
// records through emit until ctx is done or the source has nothing more to give (its targets
// exited), drains what it holds, and returns nil; it stops at the first error of emit and
// returns it. Events must refer to connections emitted before them.
type Source interface {
	Run(ctx context.Context, emit func(*trace.Record) error) error
}

// Stater is a Source that reports counters for the trace footer (trace.Footer.Stats), such as
// its own cost in ns per event. It is asked once, after Run returns.
type Stater interface {
	Stats() map[string]int64
}

// DefaultProgressEvery is how often live progress is printed.
const DefaultProgressEvery = time.Second

// Options tunes Record. The zero value records without progress output.
type Options struct {
	// Progress receives one line per ProgressEvery while recording; nil for none.
	Progress io.Writer
	// ProgressEvery is the progress period (DefaultProgressEvery when 0).
	ProgressEvery time.Duration
	// Busiest is how many connections progress lines name (default 3).
	Busiest int
	// Tap, when set, sees every record before it is written (perflab top's live view). It
	// must not keep rec.
	Tap func(rec *trace.Record)
}

// NewTrace starts a trace on out: it stamps meta's start (wall clock and trace clock, the same
// instant) and writes the header.
func NewTrace(out io.Writer, meta trace.Meta, opt *trace.WriterOptions) (*trace.Writer, error) {
	trace.StampStart(&meta)
	w, err := trace.NewWriter(out, meta, opt)
	if err != nil {
		return nil, fmt.Errorf("start trace: %w", err)
	}
	return w, nil
}

// DirStats counts the system calls (or tracer operations) of one direction.
type DirStats struct {
	Calls  uint64            // calls that moved data, as analyze counts them
	Bytes  int64             // bytes moved by them
	Errors map[uint32]uint64 // failed calls by errno (EAGAIN = 11)
	// Empty counts calls that succeeded but moved no bytes: end-of-file reads, empty sends.
	// analyze does not count them as calls, so neither do Calls.
	Empty uint64
}

// ConnStats is one connection and what moved over it.
type ConnStats struct {
	Conn trace.Connection
	Send DirStats
	Recv DirStats
}

// Result is what a recording saw.
type Result struct {
	Elapsed time.Duration // wall time from start to the end of Run
	Events  uint64        // events written
	Send    DirStats      // all connections
	Recv    DirStats      //
	// TLSSend and TLSRecv count TLS plaintext calls (SSL_write, SSL_read: trace.Op.Plaintext),
	// apart from Send and Recv and the connections' counts, since the same connections' system
	// calls carry them encrypted.
	TLSSend, TLSRecv DirStats
	Lost             map[string]uint64 // latest total per source
	Conns            []ConnStats       // in first-seen order
	Stats            map[string]int64  // the Source's counters, when it is a Stater
	Markers          uint64
}

// LostTotal sums lost events over sources.
func (r *Result) LostTotal() uint64 {
	var n uint64
	for _, v := range r.Lost {
		n += v
	}
	return n
}

// recorder is the emit side of Record: it writes each record and keeps the counters that
// progress and the summary show.
type recorder struct {
	w   *trace.Writer
	tap func(*trace.Record)

	mu    sync.Mutex
	res   Result
	index map[uint64]int // connection id -> index in res.Conns
}

func (r *recorder) emit(rec *trace.Record) error {
	if r.tap != nil {
		r.tap(rec)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch rec.Kind {
	case trace.KindEvent:
		e := &rec.Event
		if err := r.w.WriteEvent(e); err != nil {
			return fmt.Errorf("write event: %w", err)
		}
		r.res.Events++
		var cs *ConnStats
		if i, ok := r.index[e.Conn]; ok {
			cs = &r.res.Conns[i]
		}
		switch {
		case e.Op.Plaintext() && e.Dir == trace.DirSend:
			add(&r.res.TLSSend, e)
		case e.Op.Plaintext():
			add(&r.res.TLSRecv, e)
		case e.Dir == trace.DirSend:
			add(&r.res.Send, e)
			if cs != nil {
				add(&cs.Send, e)
			}
		case e.Dir == trace.DirRecv:
			add(&r.res.Recv, e)
			if cs != nil {
				add(&cs.Recv, e)
			}
		}
	case trace.KindConnection:
		if err := r.w.WriteConnection(&rec.Conn); err != nil {
			return fmt.Errorf("write connection: %w", err)
		}
		if i, ok := r.index[rec.Conn.ID]; ok {
			r.res.Conns[i].Conn = rec.Conn
		} else {
			r.index[rec.Conn.ID] = len(r.res.Conns)
			r.res.Conns = append(r.res.Conns, ConnStats{Conn: rec.Conn})
		}
	case trace.KindMarker:
		if err := r.w.WriteMarker(&rec.Marker); err != nil {
			return fmt.Errorf("write marker: %w", err)
		}
		r.res.Markers++
	case trace.KindLost:
		if err := r.w.WriteLost(rec.Lost.Source, rec.Lost.Count); err != nil {
			return fmt.Errorf("write lost count: %w", err)
		}
		r.res.Lost[rec.Lost.Source] = rec.Lost.Count
	}
	return nil
}

func add(d *DirStats, e *trace.Event) {
	if e.Errno != 0 {
		if d.Errors == nil {
			d.Errors = map[uint32]uint64{}
		}
		d.Errors[e.Errno]++
		return
	}
	if e.Bytes <= 0 && e.Op != trace.OpFrameSend && e.Op != trace.OpFrameRecv {
		d.Empty++
		return
	}
	d.Calls++
	d.Bytes += e.Bytes
}

// snapshot copies the counters progress needs.
func (r *recorder) snapshot(busiest int) (events, lost uint64, top []ConnStats) {
	r.mu.Lock()
	defer r.mu.Unlock()
	events = r.res.Events
	for _, v := range r.res.Lost {
		lost += v
	}
	top = append(top, r.res.Conns...)
	sort.SliceStable(top, func(i, j int) bool {
		return top[i].Send.Calls+top[i].Recv.Calls > top[j].Send.Calls+top[j].Recv.Calls
	})
	if len(top) > busiest {
		top = top[:busiest]
	}
	return events, lost, top
}

// Record runs src until ctx is done or src has nothing more, writing every record to w and
// printing live progress when opt.Progress is set. It does not close w: the caller closes it,
// after Record returns, to write the footer (Record has stored the source's stats in it). On
// a write error it stops src and returns the error with what was counted so far.
func Record(ctx context.Context, src Source, w *trace.Writer, opt Options) (*Result, error) {
	if opt.ProgressEvery <= 0 {
		opt.ProgressEvery = DefaultProgressEvery
	}
	if opt.Busiest <= 0 {
		opt.Busiest = 3
	}
	r := &recorder{w: w, tap: opt.Tap, index: map[uint64]int{}, res: Result{Lost: map[string]uint64{}}}
	start := time.Now()

	var wg sync.WaitGroup
	stopProgress := make(chan struct{})
	if opt.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			progress(opt.Progress, opt.ProgressEvery, opt.Busiest, start, r, stopProgress)
		}()
	}
	err := src.Run(ctx, r.emit)
	close(stopProgress)
	wg.Wait()

	r.mu.Lock()
	res := r.res
	r.mu.Unlock()
	res.Elapsed = time.Since(start)
	if st, ok := src.(Stater); ok {
		res.Stats = st.Stats()
		for k, v := range res.Stats {
			w.SetStat(k, v)
		}
	}
	if err != nil {
		return &res, fmt.Errorf("record: %w", err)
	}
	if err := w.Flush(); err != nil && !errors.Is(err, trace.ErrClosed) {
		return &res, fmt.Errorf("record: flush trace: %w", err)
	}
	return &res, nil
}

// progress prints one line per period until stop is closed.
func progress(out io.Writer, every time.Duration, busiest int, start time.Time, r *recorder, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	var lastEvents uint64
	last := start
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			events, lost, top := r.snapshot(busiest)
			rate := float64(events-lastEvents) / now.Sub(last).Seconds()
			lastEvents, last = events, now
			fmt.Fprintf(out, "recording %s: %d events, %.0f events/s, %d lost", now.Sub(start).Round(time.Second), events, rate, lost)
			for i, c := range top {
				sep := "; busiest: "
				if i > 0 {
					sep = ", "
				}
				fmt.Fprintf(out, "%s#%d %s %s→%s %d calls", sep, c.Conn.ID, c.Conn.Family, orDash(c.Conn.Local), orDash(c.Conn.Remote), c.Send.Calls+c.Recv.Calls)
			}
			fmt.Fprintln(out)
		}
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
