package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/perflab/perflab/models"
	"github.com/perflab/perflab/trace"
)

func init() {
	c := &Command{
		Name:      "top",
		Summary:   "live view of what recorded processes say on their sockets: messages, bytes, round trips and RTT per second",
		Usage:     "[-o FILE] [--sort msgs|bytes|rt|p50|p99] [--duration D] [--payload-bytes N] (-p PID[,PID...] | -- COMMAND [ARG...])",
		LinuxOnly: true,
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runTop(ctx, env, c, args) }
	Register(c)
}

// topSorts are the columns the view sorts by (descending), with the key that picks each.
var topSorts = []struct {
	name, key string
}{{"msgs", "m"}, {"bytes", "b"}, {"rt", "r"}, {"p50", "5"}, {"p99", "9"}}

func runTop(ctx context.Context, env *Env, c *Command, args []string) error {
	// top takes record's flags, with -o optional: without it nothing is written.
	sortBy := "msgs"
	var rest []string
	for i := 0; i < len(args); i++ {
		s := args[i]
		if s == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if v, ok := strings.CutPrefix(s, "--sort="); ok {
			sortBy = v
			continue
		}
		if s == "--sort" || s == "-sort" {
			if i+1 >= len(args) {
				return FlagError("sort", "", "one of msgs, bytes, rt, p50, p99")
			}
			sortBy = args[i+1]
			i++
			continue
		}
		rest = append(rest, s)
	}
	if sortIndex(sortBy) < 0 {
		return FlagError("sort", sortBy, "one of msgs, bytes, rt, p50, p99")
	}
	hasOut := false
	for _, s := range rest {
		if s == "--" {
			break
		}
		if s == "-o" || s == "--o" || strings.HasPrefix(s, "-o=") || strings.HasPrefix(s, "--o=") {
			hasOut = true
		}
		if s == "-h" || s == "--help" || s == "-help" {
			fmt.Fprintf(env.Stderr, "usage: perflab top %s\n\n%s\n\nKeys (on a terminal): m b r 5 9 sort by messages/s, bytes/s, round trips/s, RTT p50, RTT p99; q quits (the trace is still written with -o).\nWithout a terminal: one line per second.\n\nflags: those of perflab record (-o is optional here), and --sort KEY.\n", c.Usage, c.Summary)
			return nil
		}
	}
	a, err := parseRecord(env, c, rest)
	if err != nil {
		return err
	}
	if !hasOut {
		a.out = ""
	}
	a.live = newLiveView(env, sortBy)
	return recordWith(ctx, env, a)
}

func sortIndex(name string) int {
	for i, s := range topSorts {
		if s.name == name {
			return i
		}
	}
	return -1
}

// liveView is perflab top's state: what each connection did in the current second, and the
// rows of the last second.
type liveView struct {
	env    *Env
	tty    bool // stdout is a terminal: redraw a table; otherwise one line per second
	sortBy int

	mu    sync.Mutex
	conns map[uint64]*liveConn
	comms map[uint32]string // pid -> command name
}

// liveConn is one connection's counters for the current second and its round-trip state.
type liveConn struct {
	conn        trace.Connection
	msgs, bytes int64
	rtts        []int64 // ns, round trips completed this second
	inSend      bool    // a send has started a round trip that no receive has ended yet
	sendStart   int64
}

// liveRow is one line of the view: a connection over the last second.
type liveRow struct {
	conn          trace.Connection
	comm          string
	msgs, bytes   int64
	rt            int
	p50, p99      int64 // ns, 0 when no round trip
	sortKey       float64
	hasRoundTrips bool
}

func newLiveView(env *Env, sortBy string) *liveView {
	return &liveView{env: env, tty: isTerminal(env.Stdout), sortBy: sortIndex(sortBy),
		conns: map[uint64]*liveConn{}, comms: map[uint32]string{}}
}

// add takes one record of the recording. A message is a send or receive that moved bytes; a
// round trip, as this end sees it, is a send (or a run of sends) followed by a receive that
// moved bytes, and its RTT runs from the start of the first send to the end of the receive.
func (v *liveView) add(r *trace.Record) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch r.Kind {
	case trace.KindConnection:
		c := v.conns[r.Conn.ID]
		if c == nil {
			c = &liveConn{}
			v.conns[r.Conn.ID] = c
		}
		c.conn = r.Conn
		if _, ok := v.comms[r.Conn.PID]; !ok && r.Conn.PID != 0 {
			v.comms[r.Conn.PID] = commOf(r.Conn.PID)
		}
	case trace.KindEvent:
		e := &r.Event
		c := v.conns[e.Conn]
		if c == nil || e.Errno != 0 || e.Bytes <= 0 {
			return
		}
		c.msgs++
		c.bytes += e.Bytes
		switch e.Dir {
		case trace.DirSend:
			if !c.inSend {
				c.inSend, c.sendStart = true, e.TS
			}
		case trace.DirRecv:
			if c.inSend {
				c.inSend = false
				c.rtts = append(c.rtts, e.TS+e.Dur-c.sendStart)
			}
		}
	}
}

// commOf returns a process's command name, "?" when it is gone.
func commOf(pid uint32) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/comm")
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// roll returns the rows of the second that ends now, sorted, and starts the next one.
func (v *liveView) roll(secs float64) (rows []liveRow, all []int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, c := range v.conns {
		if c.msgs == 0 && len(c.rtts) == 0 {
			continue
		}
		row := liveRow{conn: c.conn, comm: v.comms[c.conn.PID], msgs: c.msgs, bytes: c.bytes, rt: len(c.rtts)}
		if len(c.rtts) > 0 {
			row.p50, row.p99 = percentiles(c.rtts)
			row.hasRoundTrips = true
			all = append(all, c.rtts...)
		}
		rows = append(rows, row)
		c.msgs, c.bytes, c.rtts = 0, 0, c.rtts[:0]
	}
	for i := range rows {
		r := &rows[i]
		switch topSorts[v.sortBy].name {
		case "msgs":
			r.sortKey = float64(r.msgs)
		case "bytes":
			r.sortKey = float64(r.bytes)
		case "rt":
			r.sortKey = float64(r.rt)
		case "p50":
			r.sortKey = float64(r.p50)
		case "p99":
			r.sortKey = float64(r.p99)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].sortKey != rows[j].sortKey {
			return rows[i].sortKey > rows[j].sortKey
		}
		return rows[i].conn.ID < rows[j].conn.ID
	})
	_ = secs
	return rows, all
}

// percentiles returns the median and the 99th percentile of v (sorted in place), by nearest
// rank (models.QuantileRank), as analyze and bench compute them.
func percentiles(v []int64) (p50, p99 int64) {
	sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
	return v[models.QuantileRank(len(v), 0.5)-1], v[models.QuantileRank(len(v), 0.99)-1]
}

// run shows the view every second until ctx is done; on a terminal, q stops the recording
// (stop) and m, b, r, 5, 9 change the sort.
func (v *liveView) run(ctx context.Context, stop context.CancelFunc) {
	keys := make(chan byte, 16)
	if v.tty {
		if restore, err := rawTerminal(v.env.Stdin); err == nil {
			defer restore()
			go readKeys(v.env.Stdin, keys)
		}
		defer fmt.Fprint(v.env.Stdout, "\x1b[?25h") // the cursor back
		fmt.Fprint(v.env.Stdout, "\x1b[?25l")
	}
	start := time.Now()
	last := start
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	v.draw(0, nil, nil, "starting")
	for {
		select {
		case <-ctx.Done():
			return
		case k := <-keys:
			switch {
			case k == 'q' || k == 'Q':
				stop()
				return
			default:
				for i, s := range topSorts {
					if string(k) == s.key {
						v.mu.Lock()
						v.sortBy = i
						v.mu.Unlock()
					}
				}
			}
		case now := <-tick.C:
			secs := now.Sub(last).Seconds()
			last = now
			rows, all := v.roll(secs)
			v.draw(now.Sub(start), rows, all, "")
		}
	}
}

// draw shows one second's rows: a table on a terminal, one line otherwise.
func (v *liveView) draw(elapsed time.Duration, rows []liveRow, all []int64, note string) {
	out := v.env.Stdout
	var msgs, bytes int64
	for _, r := range rows {
		msgs += r.msgs
		bytes += r.bytes
	}
	rtt := "-"
	if len(all) > 0 {
		p50, p99 := percentiles(all)
		rtt = fmtNs(p50) + " / " + fmtNs(p99)
	}
	if !v.tty {
		if note != "" {
			return
		}
		fmt.Fprintf(out, "top %s: %d connections active, %d msgs/s, %s/s, %d round trips/s, RTT p50/p99 %s\n",
			elapsed.Round(time.Second), len(rows), msgs, fmtBytes(bytes), len(all), rtt)
		return
	}
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	fmt.Fprintf(&b, "perflab top  %s  %d connections active  %d msgs/s  %s/s  %d round trips/s  RTT p50/p99 %s\r\n",
		elapsed.Round(time.Second), len(rows), msgs, fmtBytes(bytes), len(all), rtt)
	v.mu.Lock()
	sortName := topSorts[v.sortBy].name
	v.mu.Unlock()
	fmt.Fprintf(&b, "sorted by %s (keys: m msgs, b bytes, r round trips, 5 p50, 9 p99; q quits)\r\n\r\n", sortName)
	if note != "" {
		b.WriteString(note + "\r\n")
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPID\tCOMMAND\tFAMILY\tLOCAL\tREMOTE\tMSGS/S\tBYTES/S\tRT/S\tRTT P50\tRTT P99\r")
	for i, r := range rows {
		if i >= 40 {
			break
		}
		p50, p99 := "-", "-"
		if r.hasRoundTrips {
			p50, p99 = fmtNs(r.p50), fmtNs(r.p99)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\r\n", r.conn.ID, r.conn.PID, r.comm, r.conn.Family,
			orDash(r.conn.Local), orDash(r.conn.Remote), r.msgs, fmtBytes(r.bytes), r.rt, p50, p99)
	}
	tw.Flush()
	io.WriteString(out, b.String())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtNs renders a duration in ns for people: "850ns", "42.1µs", "3.20ms".
func fmtNs(ns int64) string {
	switch {
	case ns < 1000:
		return fmt.Sprintf("%dns", ns)
	case ns < 1000_000:
		return fmt.Sprintf("%.1fµs", float64(ns)/1e3)
	default:
		return fmt.Sprintf("%.2fms", float64(ns)/1e6)
	}
}

// fmtBytes renders a byte count: "812 B", "2.2 MB".
func fmtBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
}

// readKeys sends the bytes read from in to keys until in fails.
func readKeys(in io.Reader, keys chan<- byte) {
	r := bufio.NewReader(in)
	for {
		k, err := r.ReadByte()
		if err != nil {
			return
		}
		select {
		case keys <- k:
		default:
		}
	}
}
