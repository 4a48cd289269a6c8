package probes

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Defaults of Config.
const (
	// DefaultPayloadBytes is how many bytes of each message's data an event keeps.
	DefaultPayloadBytes = 64
	// DefaultRingBytes is the ring buffer size: 16 MiB holds about 0.15 s of events at 1M
	// events/s (about 100 bytes each with a 64-byte payload head), over ten drain periods.
	DefaultRingBytes = 16 << 20
	// DefaultDrainEvery is how often user space drains the ring. The probes submit without a
	// wakeup (a wakeup costs about 1.6 µs, five times an event), so this timer bounds how
	// stale the ring gets; 10 ms is 100 wakeups/s, negligible, and at 1M events/s fills about
	// 6% of the default ring between drains.
	DefaultDrainEvery = 10 * time.Millisecond
)

// ProgramPrefix starts the name of every eBPF program and map perflab loads, so that leftovers
// can be recognised.
const ProgramPrefix = "perflab_"

// LostSource names the ring buffer in trace Lost records and footers.
const LostSource = "ringbuf"

// Config describes a socket probe to open.
type Config struct {
	// PayloadBytes is how many bytes of data each event keeps, 0..256 (DefaultPayloadBytes
	// when negative).
	PayloadBytes int
	// RingBytes is the ring buffer size in bytes: a power of two, at least one page
	// (DefaultRingBytes when 0).
	RingBytes int
	// WakeupBytes: a record that finds this many bytes waiting in the ring wakes the reader at
	// once (RingBytes/4 when 0).
	WakeupBytes int
	// DrainEvery is how often the ring is drained without a wakeup (DefaultDrainEvery when 0).
	DrainEvery time.Duration
	// Waits adds the loop probe (bpf/loop.bpf.c): one event per wait call of a recorded thread
	// (epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect6, io_uring_enter).
	Waits bool
	// WaitHook is how the loop probe attaches: WaitHookTracepoint, WaitHookBTF, or "" for
	// the tracepoints when tracefs is mounted and the BTF hooks otherwise.
	WaitHook string
	// TLS captures TLS plaintext at OpenSSL's SSL_write, SSL_read and their _ex variants, in
	// every libssl the target processes map (AttachTLS adds libraries found before they run).
	TLS bool
	// Uprobes are functions whose calls are messages (record --uprobe).
	Uprobes []UprobeSpec
	// Note receives one line for each uprobe that could not be attached (a binary without the
	// symbol); the recording goes on without it. Nil discards them.
	Note func(string)
	// Evidence selects the kernel evidence recorded next to the messages (none when 0).
	Evidence Evidence
}

// Ways the loop probe attaches (Config.WaitHook).
const (
	// WaitHookTracepoint attaches to the syscall tracepoints of the eight wait calls
	// (syscalls:sys_enter_epoll_wait, ...): only those calls run a program. Needs tracefs.
	WaitHookTracepoint = "tracepoint"
	// WaitHookBTF attaches to the raw sys_enter and sys_exit tracepoints: every system call
	// of every process runs the program's first test. Needs only BTF.
	WaitHookBTF = "tp_btf"
)

func (c Config) withDefaults() (Config, error) {
	if c.PayloadBytes < 0 {
		c.PayloadBytes = DefaultPayloadBytes
	}
	if c.PayloadBytes > 256 {
		return c, fmt.Errorf("payload bytes %d over 256", c.PayloadBytes)
	}
	if c.RingBytes == 0 {
		c.RingBytes = DefaultRingBytes
	}
	if c.RingBytes < 4096 || c.RingBytes&(c.RingBytes-1) != 0 {
		return c, fmt.Errorf("ring size %d is not a power of two of at least 4096 bytes", c.RingBytes)
	}
	if c.WakeupBytes <= 0 {
		c.WakeupBytes = c.RingBytes / 4
	}
	if c.WaitHook != "" && c.WaitHook != WaitHookTracepoint && c.WaitHook != WaitHookBTF {
		return c, fmt.Errorf("wait hook %q: want %s or %s", c.WaitHook, WaitHookTracepoint, WaitHookBTF)
	}
	if c.DrainEvery <= 0 {
		c.DrainEvery = DefaultDrainEvery
	}
	return c, nil
}

// ErrUnsupported reports that eBPF socket probes cannot run on this platform or kernel.
var ErrUnsupported = errors.New("eBPF socket probes are not supported here")

// PrivilegeError reports the capabilities that opening probes needs and the process lacks.
type PrivilegeError struct {
	Missing []string // "CAP_BPF", "CAP_PERFMON"
}

func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("missing %s: run as root (sudo perflab record ...) or grant them with "+
		"'sudo setcap cap_bpf,cap_perfmon+ep $(command -v perflab)'; without eBPF, venusd "+
		"records itself with its in-process tracer: perflab venus run --trace FILE",
		strings.Join(e.Missing, " and "))
}

// Counts are the probe's own counters, summed over CPUs.
type Counts struct {
	Produced   uint64 // event records the probes produced (written to the ring or lost)
	LostEvents uint64 // event records that found the ring full
	LostConns  uint64 // connection records that found the ring full (sent again with the next event)
	// Other counts the socket sends and receives of processes that are not recorded that went
	// through the socket hooks (each costs them the target test).
	Other uint64
	// TargetSwitches counts the context switches of recorded threads.
	TargetSwitches uint64
	// TargetNs is the time the programs spent on recorded threads while they were timing
	// themselves (inside the statistics windows), ns.
	TargetNs uint64
	// TargetRuns counts the runs timed in TargetNs.
	TargetRuns uint64
	// UprobeEvents counts the records of the uprobe object (TLS plaintext, --uprobe), written or
	// lost; they are not in Produced, whose events TargetNs times.
	UprobeEvents uint64
}
