package reports

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/perflab/perflab/collectors"
)

// Record writes what `perflab record` saw, for a person at the end of a recording: the length,
// events and lost events, a table of calls and bytes per direction, the connections (the
// busiest first, at most maxConns; all when maxConns is 0), and the probe's cost when the
// source reported one.
func Record(w io.Writer, r *collectors.Result, maxConns int) error {
	var b strings.Builder
	b.WriteString(recordHeadline(r) + "\n\n")
	dirs := Section{Header: []string{"direction", "calls", "bytes", "errors"}, Align: "lrrl", Rows: [][]string{
		{"send", Count(r.Send.Calls), Count(r.Send.Bytes), errnoCounts(r.Send.Errors)},
		{"recv", Count(r.Recv.Calls), Count(r.Recv.Bytes), errnoCounts(r.Recv.Errors)},
	}}
	if r.TLSSend.Calls+r.TLSRecv.Calls > 0 {
		dirs.Rows = append(dirs.Rows,
			[]string{"tls send", Count(r.TLSSend.Calls), Count(r.TLSSend.Bytes), errnoCounts(r.TLSSend.Errors)},
			[]string{"tls recv", Count(r.TLSRecv.Calls), Count(r.TLSRecv.Bytes), errnoCounts(r.TLSRecv.Errors)})
		dirs.Notes = append(dirs.Notes, "tls: the plaintext calls (SSL_write, SSL_read), not in send and recv, whose system calls carry them encrypted")
	}
	if r.Recv.Empty > 0 || r.Send.Empty > 0 {
		dirs.Notes = append(dirs.Notes, fmt.Sprintf("not counted as calls, as analyze does not: %s end-of-file reads, %s empty sends",
			Count(r.Recv.Empty), Count(r.Send.Empty)))
	}
	if err := writeTextSection(&b, &dirs); err != nil {
		return err
	}
	b.WriteString("\n")
	conns := recordConnections(r, maxConns)
	if err := writeTextSection(&b, &conns); err != nil {
		return err
	}
	if cost := r.ProbeCost(); cost != "" {
		b.WriteString("\n" + cost + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// recordHeadline is the first line: "recorded 2.0 s: 1,000 events (500/s), 3 lost (ringbuf 3)".
func recordHeadline(r *collectors.Result) string {
	rate := 0.0
	if secs := r.Elapsed.Seconds(); secs > 0 {
		rate = float64(r.Events) / secs
	}
	line := fmt.Sprintf("recorded %s: %s events (%s/s), %s lost", collectors.FormatElapsed(r.Elapsed), Count(r.Events), Count(rate), Count(r.LostTotal()))
	if len(r.Lost) == 0 {
		return line
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Lost)) {
		parts = append(parts, k+" "+Count(r.Lost[k]))
	}
	return line + " (" + strings.Join(parts, ", ") + ")"
}

// recordConnections is the table of connections, the busiest (most calls) first.
func recordConnections(r *collectors.Result, maxConns int) Section {
	conns := slices.Clone(r.Conns)
	sort.SliceStable(conns, func(i, j int) bool {
		return conns[i].Send.Calls+conns[i].Recv.Calls > conns[j].Send.Calls+conns[j].Recv.Calls
	})
	sec := Section{Title: Count(len(conns)) + " connections",
		Header: []string{"id", "family", "pid", "local", "remote", "send calls", "send bytes", "recv calls", "recv bytes", "errors"},
		Align:  "rlrllrrrrl"}
	if maxConns > 0 && len(conns) > maxConns {
		sec.Title += fmt.Sprintf(" (the %d busiest)", maxConns)
		conns = conns[:maxConns]
	}
	if len(conns) == 0 {
		sec.Header = nil
	}
	for _, c := range conns {
		errs := map[uint32]uint64{}
		for _, m := range []map[uint32]uint64{c.Send.Errors, c.Recv.Errors} {
			for k, v := range m {
				errs[k] += v
			}
		}
		sec.Rows = append(sec.Rows, []string{ID(c.Conn.ID), c.Conn.Family.String(), ID(uint64(c.Conn.PID)), orDash(c.Conn.Local), orDash(c.Conn.Remote),
			Count(c.Send.Calls), Count(c.Send.Bytes), Count(c.Recv.Calls), Count(c.Recv.Bytes), errnoCounts(errs)})
	}
	return sec
}

// errnoCounts is a count of failed calls with its errnos: "100 (EAGAIN 100)", or "0".
func errnoCounts(m map[uint32]uint64) string {
	if len(m) == 0 {
		return "0"
	}
	var total uint64
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
		parts = append(parts, collectors.ErrnoName(k)+" "+Count(m[k]))
	}
	return Count(total) + " (" + strings.Join(parts, ", ") + ")"
}
