// common.h: what perflab's BPF objects share.
//
// record.bpf.c is the base object: it owns the maps below. Every other object (its own source
// file, its own bpf2go line in probes/gen.go, loaded only when its part is switched on)
// includes this header and is loaded with the base object's maps in place of its own of the
// same name (ebpf.CollectionOptions.MapReplacements, done by Probe.loadObject): one ring
// buffer, one set of target processes, one set of counters. A replaced map must be declared
// exactly as here.
//
// Record kinds and counter slots are appended at the end, never renumbered: user space
// decodes them by number (probes/decode.go, probes.Counts).

#ifndef PERFLAB_COMMON_H
#define PERFLAB_COMMON_H

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

#define MAX_PAYLOAD 256

// Operations: the same numbers as trace.Op.
enum op {
	OP_NONE = 0,
	OP_SENDTO = 1,
	OP_SENDMSG = 2,
	OP_SENDMMSG = 3,
	OP_RECVFROM = 4,
	OP_RECVMSG = 5,
	OP_RECVMMSG = 6,
	OP_READ = 7,
	OP_WRITE = 8,
	OP_READV = 9,
	OP_WRITEV = 10,
	// Wait calls of an event loop (loop.bpf.c).
	OP_EPOLL_WAIT = 15,
	OP_EPOLL_PWAIT = 16,
	OP_EPOLL_PWAIT2 = 17,
	OP_POLL = 18,
	OP_PPOLL = 19,
	OP_SELECT = 20,
	OP_PSELECT6 = 21,
	OP_IO_URING_ENTER = 22,
};

// Record kinds: the first byte of every ring-buffer record.
enum kind {
	KIND_EVENT = 1, // struct event
	KIND_CONN = 2,  // struct conn (record.bpf.c)
	KIND_WAIT = 3,  // struct event of a wait call: no socket, no payload (loop.bpf.c)
	KIND_UEVENT = 4, // struct uevent: a message seen at a user-space function (uprobe.bpf.c)
	KIND_SCHED = 5, // struct sched_rec: a runnable stretch of a recorded thread (evidence.bpf.c)
	KIND_TCP = 6,   // struct tcp_rec: a TCP socket's state (evidence.bpf.c)
};

// Counters (slots of perflab_counts, per CPU).
enum counter {
	CNT_LOST_EVENTS = 0, // event records that found no room in the ring
	CNT_LOST_CONNS = 1,  // connection records that found no room (retried on the next event)
	CNT_EVENTS = 2,      // event records produced (written + lost)
	CNT_OTHER = 3,       // socket hook runs for threads of other processes (the cost's split)
	CNT_SWITCH = 4,      // sched_switch runs that found a target thread
	CNT_TARGET_NS = 5,   // ns the programs spent on target threads while measuring
	CNT_TARGET_RUNS = 6, // the runs timed in CNT_TARGET_NS
	CNT_UPROBE_EVENTS = 7, // uprobe records produced (uprobe.bpf.c), apart from CNT_EVENTS: not timed in CNT_TARGET_NS
	CNT_EV_LOST = 8,     // evidence records that found no room in the ring (evidence.bpf.c)
	CNT_EV_SCHED = 9,    // sched records produced
	CNT_EV_TCP = 10,     // tcp records produced
	CNT_MAX = 16,        // room for more
};

// event is one system call on a socket. Followed by payload_len bytes of data.
struct event {
	__u8 kind;
	__u8 op;
	__u16 family;
	__u16 payload_len;
	__u16 nmsgs; // messages moved (sendmmsg/recvmmsg), 1 otherwise
	__u32 pid;
	__u32 tid;
	__u64 ts;     // CLOCK_MONOTONIC ns at entry
	__u64 dur;    // ns from entry to exit
	__u64 cookie; // socket cookie
	__s64 ret;    // bytes moved, or -errno
	__u32 fd;
	__u32 _pad;
};

// Set by the loader: a record that finds the ring holding this many bytes wakes the reader
// (records are otherwise submitted without a wakeup; user space drains on a timer). Event
// records look at the ring's fill only once every wakeup_mask+1 records of a CPU (reading it
// touches the cache line user space writes as it consumes); the loader keeps that many records
// well under wakeup_bytes.
const volatile __u64 wakeup_bytes = 1 << 20;
const volatile __u64 wakeup_mask = 0;

// The ring buffer every record goes through (its size is set by the loader).
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20);
} perflab_events SEC(".maps");

// Target processes (tgid -> 1).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} perflab_targets SEC(".maps");

// Counters, per CPU (enum counter).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} perflab_counts SEC(".maps");

// count adds one to a counter of this CPU and returns its new value (0 when the slot does
// not exist).
static __always_inline __u64 count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&perflab_counts, &slot);
	if (!c)
		return 0;
	*c += 1;
	return *c;
}

// ring_flags is the flags argument of a ring-buffer submit: no wakeup, unless the ring holds
// wakeup_bytes or more.
static __always_inline __u64 ring_flags(void)
{
	if (bpf_ringbuf_query(&perflab_events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

// ring_flags_nth is ring_flags for the n-th record of a CPU: the ring's fill is looked at only
// when n is a multiple of wakeup_mask+1.
static __always_inline __u64 ring_flags_nth(__u64 n)
{
	if (n & wakeup_mask)
		return BPF_RB_NO_WAKEUP;
	return ring_flags();
}

#ifdef PERFLAB_SELF_TIMING
// Self-timing, for the objects whose runs on recorded threads count into record's "kernel time
// per recorded event" (record.bpf.c, loop.bpf.c: define PERFLAB_SELF_TIMING before including
// this header). perflab sets measuring (each object's own) while a statistics window is open;
// a run then times itself into CNT_TARGET_NS and counts itself in CNT_TARGET_RUNS, at the cost
// of three more clock reads.
volatile __u32 measuring;

// timing is a run timing itself while measuring: t0 the clock read after the first, clk the
// cost of one clock read (the gap between the first two). A run's own time is then
// end - t0 - clk: the reads before t0 and the half of the last one after it are not counted,
// and the read that ends the span, counted in it, is taken out by clk. t0 is 0 when not
// measuring.
struct timing {
	__u64 t0, clk;
};

static __always_inline void timing_start(struct timing *tm)
{
	tm->t0 = 0;
	if (!measuring)
		return;
	__u64 a = bpf_ktime_get_ns();
	tm->t0 = bpf_ktime_get_ns();
	tm->clk = tm->t0 - a;
}

// timing_end adds the run's own time to CNT_TARGET_NS.
static __always_inline void timing_end(struct timing *tm)
{
	if (!tm->t0)
		return;
	__u64 d = bpf_ktime_get_ns() - tm->t0;
	d = d > tm->clk ? d - tm->clk : 0;
	__u32 slot = CNT_TARGET_NS;
	__u64 *c = bpf_map_lookup_elem(&perflab_counts, &slot);
	if (c)
		*c += d;
	count(CNT_TARGET_RUNS);
}
#endif

// The generation of the target set (one entry): bumped after every process that becomes a
// target is in perflab_targets (by the fork hook, and by perflab after AddPID).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} perflab_gen SEC(".maps");

// The last process this CPU found not to be a target, as tgid << 32 | generation (one store,
// so never torn), so that a process that is not recorded, calling again, is told apart with
// two array lookups instead of a hash lookup. Each object has its own.
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} perflab_notarget SEC(".maps");

// is_target_tgid reports whether the current process is a target: a look at this CPU's last
// process that was not, then one hash lookup. The generation is read before the lookup and
// bumped after every addition, so a remembered answer is never older than the target set.
static __always_inline bool is_target_tgid(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 zero = 0;
	__u64 *gen = bpf_map_lookup_elem(&perflab_gen, &zero);
	__u64 *last = bpf_map_lookup_elem(&perflab_notarget, &zero);
	if (!gen || !last)
		return bpf_map_lookup_elem(&perflab_targets, &tgid) != 0;
	__u64 key = ((__u64)tgid << 32) | (__u32)*(volatile __u64 *)gen;
	if (*last == key)
		return false;
	if (bpf_map_lookup_elem(&perflab_targets, &tgid))
		return true;
	*last = key;
	return false;
}

// targets_changed bumps the generation of the target set, after an addition to it.
static __always_inline void targets_changed(void)
{
	__u32 zero = 0;
	__u64 *gen = bpf_map_lookup_elem(&perflab_gen, &zero);
	if (gen)
		__sync_fetch_and_add(gen, 1);
}

#endif
