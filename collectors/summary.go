package collectors

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteSummary prints the recording's totals, its connections (the busiest first, at most
// maxConns), the lost events, and the source's cost when it reported one, as aligned plain
// text.
func (r *Result) WriteSummary(out io.Writer, maxConns int) error {
	secs := r.Elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(r.Events) / secs
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recorded %s: %d events (%.0f/s), %d lost", FormatElapsed(r.Elapsed), r.Events, rate, r.LostTotal())
	if len(r.Lost) > 0 {
		b.WriteString(" (")
		for i, k := range sortedKeys(r.Lost) {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s %d", k, r.Lost[k])
		}
		b.WriteString(")")
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "direction\tcalls\tbytes\terrors")
	fmt.Fprintf(tw, "send\t%d\t%d\t%s\n", r.Send.Calls, r.Send.Bytes, errnos(r.Send.Errors))
	fmt.Fprintf(tw, "recv\t%d\t%d\t%s\n", r.Recv.Calls, r.Recv.Bytes, errnos(r.Recv.Errors))
	tw.Flush()
	if r.Recv.Empty > 0 || r.Send.Empty > 0 {
		fmt.Fprintf(&b, "(not counted as calls, as analyze does not: %d end-of-file reads, %d empty sends)\n", r.Recv.Empty, r.Send.Empty)
	}

	conns := append([]ConnStats(nil), r.Conns...)
	sort.SliceStable(conns, func(i, j int) bool {
		return conns[i].Send.Calls+conns[i].Recv.Calls > conns[j].Send.Calls+conns[j].Recv.Calls
	})
	fmt.Fprintf(&b, "\n%d connections", len(conns))
	if maxConns > 0 && len(conns) > maxConns {
		fmt.Fprintf(&b, " (the %d busiest)", maxConns)
		conns = conns[:maxConns]
	}
	b.WriteString("\n")
	if len(conns) > 0 {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "id\tfamily\tpid\tlocal\tremote\tsend calls\tsend bytes\trecv calls\trecv bytes\terrors")
		for _, c := range conns {
			errs := errnos(merge(c.Send.Errors, c.Recv.Errors))
			fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", c.Conn.ID, c.Conn.Family, c.Conn.PID,
				orDash(c.Conn.Local), orDash(c.Conn.Remote), c.Send.Calls, c.Send.Bytes, c.Recv.Calls, c.Recv.Bytes, errs)
		}
		tw.Flush()
	}
	if cost := probeCost(r.Stats); cost != "" {
		b.WriteString("\n" + cost + "\n")
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// FormatElapsed renders a recording's length for people: "1.3 s" from one second up, "20 ms"
// or "0.4 ms" below.
func FormatElapsed(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
}

// probeCost describes the kernel cost a probe reported in its stats, or "" when it did not:
// the kernel time per recorded event, and what processes that are not recorded pay, each as
// measured (see probes.Probe.Stats for the keys).
func probeCost(st map[string]int64) string {
	if _, has := st["probe_events"]; !has {
		return ""
	}
	var b strings.Builder
	b.WriteString("probe cost: ")
	perEvent, measured := st["probe_ns_per_event"]
	switch errno, failed := st["probe_stats_errno"]; {
	case failed:
		b.WriteString("unknown per recorded event: " + statsFailure(errno))
	case measured:
		fmt.Fprintf(&b, "%d ns of kernel time per recorded event", perEvent)
		if n := st["probe_stats_events"]; n != st["probe_events"] {
			fmt.Fprintf(&b, " (measured over %d of the %d events)", n, st["probe_events"])
		}
	case st["probe_events"] == 0:
		b.WriteString("no event recorded, so no time per event")
	default:
		b.WriteString("per recorded event not measured: no event fell in the sampled statistics windows")
	}
	call, hasCall := st["probe_other_ns_per_call"]
	sw, hasSwitch := st["probe_other_ns_per_switch"]
	if hasCall || hasSwitch {
		b.WriteString("; other processes: ")
		if hasCall {
			fmt.Fprintf(&b, "%d ns per socket send or receive, ", call)
		}
		if hasSwitch {
			fmt.Fprintf(&b, "%d ns per context switch, ", sw)
		}
		switch st["probe_waits"] {
		case 0:
			b.WriteString("nothing on their other system calls")
		case 1:
			b.WriteString("and, for the wait-call tracepoints (--waits), the kernel's slower path on every other system call (about 50 ns each, docs/record.md)")
		default:
			b.WriteString("and, for the raw wait-call hooks (--waits), the kernel's slower path and a target test on every other system call (about 150 ns each, docs/record.md)")
		}
	}
	return b.String()
}

// statsFailure says why the kernel's BPF run-time statistics could not be enabled, from the
// errno it gave (-1 when the failure had none).
func statsFailure(errno int64) string {
	switch errno {
	case 1, 13: // EPERM, EACCES
		return fmt.Sprintf("the kernel refused to enable its BPF run-time statistics (%s): they need CAP_SYS_ADMIN", errnoName(uint32(errno)))
	case 22: // EINVAL
		return "this kernel has no BPF run-time statistics (BPF_ENABLE_STATS needs Linux 5.8)"
	case -1:
		return "the kernel's BPF run-time statistics could not be enabled"
	}
	return fmt.Sprintf("the kernel's BPF run-time statistics could not be enabled (%s)", errnoName(uint32(errno)))
}

func errnos(m map[uint32]uint64) string {
	if len(m) == 0 {
		return "0"
	}
	keys := make([]uint32, 0, len(m))
	var total uint64
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", errnoName(k), m[k])
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

var errnoNames = map[uint32]string{
	1: "EPERM", 13: "EACCES", 22: "EINVAL", 4: "EINTR", 9: "EBADF", 11: "EAGAIN", 14: "EFAULT", 32: "EPIPE", 104: "ECONNRESET",
	107: "ENOTCONN", 110: "ETIMEDOUT", 111: "ECONNREFUSED", 512: "ERESTARTSYS",
}

func errnoName(e uint32) string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", e)
}

func merge(a, b map[uint32]uint64) map[uint32]uint64 {
	if len(a) == 0 {
		return b
	}
	out := map[uint32]uint64{}
	for k, v := range a {
		out[k] += v
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
