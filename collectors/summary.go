package collectors

import (
	"fmt"
	"strings"
	"time"
)

// ProbeCost describes the kernel cost the source reported in its stats (the kernel time per
// recorded event, what processes that are not recorded pay), or "" when it reported none.
func (r *Result) ProbeCost() string { return probeCost(r.Stats) }

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

// CostMinEvents is the least number of events the sampled statistics windows must have timed
// for their kernel time per event to be given as the recording's: 100. A recording whose load
// fell between the windows leaves a few events of its idle start, each paying cold caches.
const CostMinEvents = 100

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
	case measured && st["probe_stats_events"] < CostMinEvents && st["probe_stats_events"] != st["probe_events"]:
		fmt.Fprintf(&b, "per recorded event not known: %d ns over only %d of the %d events, those that fell in the sampled statistics windows, too few to stand for the recording (a lone event pays cold caches)",
			perEvent, st["probe_stats_events"], st["probe_events"])
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
	if _, has := st["evidence_parts"]; has {
		n := st["evidence_sched_records"] + st["evidence_tcp_records"]
		fmt.Fprintf(&b, "; kernel evidence (--evidence): %d records (%d scheduler, %d TCP), %d lost", n,
			st["evidence_sched_records"], st["evidence_tcp_records"], st["evidence_lost_records"])
		if v, ok := st["evidence_ns_per_run"]; ok {
			fmt.Fprintf(&b, ", %d ns a program run", v)
		}
		if v, ok := st["evidence_other_ns_per_wakeup"]; ok {
			fmt.Fprintf(&b, ", other processes %d ns per wake-up", v)
			if w, ok := st["evidence_other_ns_per_switch"]; ok {
				fmt.Fprintf(&b, " and %d ns per context switch", w)
			}
		}
	}
	return b.String()
}

// statsFailure says why the kernel's BPF run-time statistics could not be enabled, from the
// errno it gave (-1 when the failure had none).
func statsFailure(errno int64) string {
	switch errno {
	case 1, 13: // EPERM, EACCES
		return fmt.Sprintf("the kernel refused to enable its BPF run-time statistics (%s): they need CAP_SYS_ADMIN", ErrnoName(uint32(errno)))
	case 22: // EINVAL
		return "this kernel has no BPF run-time statistics (BPF_ENABLE_STATS needs Linux 5.8)"
	case -1:
		return "the kernel's BPF run-time statistics could not be enabled"
	}
	return fmt.Sprintf("the kernel's BPF run-time statistics could not be enabled (%s)", ErrnoName(uint32(errno)))
}

var errnoNames = map[uint32]string{
	1: "EPERM", 13: "EACCES", 22: "EINVAL", 4: "EINTR", 9: "EBADF", 11: "EAGAIN", 14: "EFAULT", 32: "EPIPE", 104: "ECONNRESET",
	107: "ENOTCONN", 110: "ETIMEDOUT", 111: "ECONNREFUSED", 512: "ERESTARTSYS",
}

// ErrnoName names an errno as the kernel's headers do ("EAGAIN"), or "errno N" when it is not
// one a recording usually sees.
func ErrnoName(e uint32) string {
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return fmt.Sprintf("errno %d", e)
}
