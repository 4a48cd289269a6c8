//go:build ignore

// evidence.bpf.c: the kernel's side of why a round trip was slow.
//
// Loaded next to record.bpf.c (the base object) only when `perflab record --evidence` asks for
// one of its parts, it shares the base object's ring buffer, target processes and counters
// (common.h), its socket storage (perflab_socks: the sockets recorded threads used) and its
// per-thread storage (perflab_tasks: the threads that have moved a socket message), and writes two record kinds (KIND_SCHED,
// KIND_TCP) for three parts:
//
//   sched  sched:sched_wakeup,    a recorded thread became runnable (woken, or preempted while
//          sched:sched_wakeup_new running) and then ran: one record at its switch-in, with when
//          sched:sched_switch     it became runnable, when it ran, its CPU, whether that CPU was
//                                 idle until then (a halted CPU woke up for it), and the waker.
//   tcp    tcp:tcp_retransmit_skb a segment of a recorded socket was sent again;
//          tcp:tcp_rcv_space_adjust a recorded thread read from a TCP socket: a snapshot of the
//                                 socket's state (srtt, cwnd, windows, retransmissions), at most
//                                 one per socket every snap_every_ns.
//   conn   sock:inet_sock_set_state a recorded TCP socket changed state: connect (SYN_SENT),
//                                 established, listen, the close states; each with a snapshot.
//
// Only tp_btf programs, as in the base object. A thread that is not recorded costs a task
// storage lookup per wakeup and per switch (sched) or a cookie lookup per retransmission or
// state change (tcp, conn).

#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define IPPROTO_TCP 6

// What a tcp record reports.
enum tcp_what {
	TCP_STATE = 1,   // a state change: old and new state
	TCP_RETRANS = 2, // a retransmitted segment
	TCP_SNAP = 3,    // a periodic snapshot
};

// sched record flags.
enum sched_flag {
	SCHED_IDLE = 1,    // the CPU ran its idle task until the thread ran
	SCHED_PREEMPT = 2, // runnable since it was preempted (not woken)
	SCHED_NEW = 4,     // a new thread's first run
};

// TCP states (include/net/tcp_states.h).
enum {
	ST_ESTABLISHED = 1,
	ST_SYN_SENT = 2,
	ST_SYN_RECV = 3,
	ST_FIN_WAIT1 = 4,
	ST_CLOSE = 7,
	ST_CLOSE_WAIT = 8,
	ST_LAST_ACK = 9,
	ST_LISTEN = 10,
};

// sched_rec is one stretch a recorded thread spent runnable before it ran.
struct sched_rec {
	__u8 kind;
	__u8 flags;
	__u16 cpu;
	__u32 pid;
	__u32 tid;
	__u32 waker; // tgid of the task that woke it (0 for an interrupt on an idle CPU)
	__u64 wake_ts; // CLOCK_MONOTONIC ns it became runnable
	__u64 run_ts;  // ns it ran
};

// tcp_rec is a TCP socket's state at an instant.
struct tcp_rec {
	__u8 kind;
	__u8 what;
	__u8 oldstate;
	__u8 newstate;
	__u32 pid; // tgid of the recorded process in whose context it happened, 0 in softirq
	__u64 ts;
	__u64 cookie;
	__u32 srtt_us; // smoothed RTT, µs (the kernel keeps it ×8)
	__u32 cwnd;    // congestion window, segments
	__u32 snd_wnd; // peer's receive window, bytes
	__u32 rcv_wnd; // our receive window, bytes
	__u32 total_retrans;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 mss;
	__u64 bytes_acked;
	__u64 bytes_received;
	__u16 lport;
	__u16 rport;
	__u32 segs_out;
};

// Minimal kernel types this object reads beyond vmlinux_min.h (relocated by CO-RE).
struct tcp_sock {
	__u32 srtt_us;
	__u32 snd_cwnd;
	__u32 snd_wnd;
	__u32 rcv_wnd;
	__u32 total_retrans;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 mss_cache;
	__u64 bytes_acked;
	__u64 bytes_received;
	__u32 segs_out;
} __attribute__((preserve_access_index));

struct sock_common___ev {
	volatile unsigned char skc_state;
} __attribute__((preserve_access_index));

struct sock___ev {
	struct sock_common___ev __sk_common;
} __attribute__((preserve_access_index));

// ev_task is a recorded thread's scheduling state.
struct ev_task {
	__u64 wake_ts; // runnable since, 0 when running or asleep
	__u32 waker;
	__u8 flags;
};

// ev_sock is a recorded TCP socket's state.
struct ev_sock {
	__u64 last_snap; // ns of its last snapshot
};

// ev_snap is when a TCP socket read by a recorded thread had its last snapshot, in its own
// socket storage (found in the socket, no cookie or hash lookup): last_ns, and check_j, the
// jiffy of the last clock read. A read in the same jiffy as that one is less than a tick (at
// most 10 ms) after it, so it does not read the clock at all.
struct ev_snap {
	__u64 last_ns;
	__u64 check_j;
};

// Keep the record types in the BTF for bpf2go.
const struct sched_rec *unused_sched_rec __attribute__((unused));
const struct tcp_rec *unused_tcp_rec __attribute__((unused));

const volatile __u64 snap_every_ns = 10000000;

// The base object's socket storage: a socket that has it was used by a recorded thread. Only
// its presence is tested here (its value size is set to the base object's by the loader).
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} perflab_socks SEC(".maps");

// The base object's per-thread storage; only its presence is tested here (its value size is
// set to the base object's by the loader).
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} perflab_tasks SEC(".maps");

// This object's own maps.
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ev_task);
} perflab_evtasks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct ev_sock);
} perflab_evsocks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ev_snap);
} perflab_evsnap SEC(".maps");

// Local ports that recorded processes listen on (port -> tgid): the connections accepted on
// them are theirs.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u16);
	__type(value, __u32);
} perflab_evports SEC(".maps");

static __always_inline bool target_tgid(__u32 tgid)
{
	return bpf_map_lookup_elem(&perflab_targets, &tgid) != 0;
}

// ---- sched ----

// recorded_thread returns p's scheduling state when p is a thread that has moved a socket
// message in a recorded process (it has the base object's storage), creating it then.
static __always_inline struct ev_task *recorded_thread(struct task_struct *p, bool create)
{
	// A task without any local storage (every thread of a process that is not recorded) is
	// told apart with one load.
	if (bpf_core_field_exists(p->bpf_storage) && !p->bpf_storage)
		return 0;
	struct ev_task *t = bpf_task_storage_get(&perflab_evtasks, p, 0, 0);
	if (t || !create)
		return t;
	if (!bpf_task_storage_get(&perflab_tasks, p, 0, 0))
		return 0;
	return bpf_task_storage_get(&perflab_evtasks, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline int on_wakeup(struct task_struct *p, __u8 flags)
{
	struct ev_task *t = recorded_thread(p, true);
	if (!t || t->wake_ts)
		return 0;
	t->wake_ts = bpf_ktime_get_ns();
	t->waker = bpf_get_current_pid_tgid() >> 32;
	t->flags = flags;
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(perflab_wake, struct task_struct *p)
{
	return on_wakeup(p, 0);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(perflab_wakenew, struct task_struct *p)
{
	return on_wakeup(p, SCHED_NEW);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(perflab_runq, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = 0;
	struct ev_task *pt = recorded_thread(prev, false);
	if (pt) {
		if (preempt || prev_state == 0) {
			// Still runnable: it waits for a CPU from now.
			now = bpf_ktime_get_ns();
			pt->wake_ts = now;
			pt->waker = 0;
			pt->flags = SCHED_PREEMPT;
		} else {
			pt->wake_ts = 0;
		}
	}
	struct ev_task *nt = recorded_thread(next, false);
	if (!nt || !nt->wake_ts)
		return 0;
	if (!now)
		now = bpf_ktime_get_ns();
	struct sched_rec r = {};
	r.kind = KIND_SCHED;
	r.flags = nt->flags;
	if (prev->pid == 0)
		r.flags |= SCHED_IDLE;
	r.cpu = bpf_get_smp_processor_id();
	r.pid = next->tgid;
	r.tid = next->pid;
	r.waker = nt->waker;
	r.wake_ts = nt->wake_ts;
	r.run_ts = now;
	nt->wake_ts = 0;
	// The ring's fill is looked at once every wakeup_mask+1 records of a CPU, as for events.
	__u64 n = count(CNT_EV_SCHED);
	if (bpf_ringbuf_output(&perflab_events, &r, sizeof(r), ring_flags_nth(n)) != 0)
		count(CNT_EV_LOST);
	return 0;
}

// ---- tcp and conn ----

static __always_inline void fill_tcp(struct tcp_rec *r, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	r->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
	r->cwnd = BPF_CORE_READ(tp, snd_cwnd);
	r->snd_wnd = BPF_CORE_READ(tp, snd_wnd);
	r->rcv_wnd = BPF_CORE_READ(tp, rcv_wnd);
	r->total_retrans = BPF_CORE_READ(tp, total_retrans);
	r->lost_out = BPF_CORE_READ(tp, lost_out);
	r->retrans_out = BPF_CORE_READ(tp, retrans_out);
	r->mss = BPF_CORE_READ(tp, mss_cache);
	r->bytes_acked = BPF_CORE_READ(tp, bytes_acked);
	r->bytes_received = BPF_CORE_READ(tp, bytes_received);
	r->segs_out = BPF_CORE_READ(tp, segs_out);
	r->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
	r->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
}

static __always_inline void emit_tcp(struct sock *sk, __u64 cookie, __u8 what, __u8 oldstate,
				     __u8 newstate, __u32 pid, __u64 now)
{
	struct tcp_rec r = {};
	r.kind = KIND_TCP;
	r.what = what;
	r.oldstate = oldstate;
	r.newstate = newstate;
	r.pid = pid;
	r.ts = now;
	r.cookie = cookie;
	fill_tcp(&r, sk);
	count(CNT_EV_TCP);
	if (bpf_ringbuf_output(&perflab_events, &r, sizeof(r), ring_flags()) != 0)
		count(CNT_EV_LOST);
}

// recorded_sock returns the state of the socket with cookie when it belongs to a recorded
// process: a recorded thread used it (it has the base object's socket storage) or this object
// has seen it before (connect, accept).
static __always_inline struct ev_sock *recorded_sock(struct sock *sk, __u64 cookie)
{
	struct ev_sock *s = bpf_map_lookup_elem(&perflab_evsocks, &cookie);
	if (s)
		return s;
	if (!bpf_sk_storage_get(&perflab_socks, sk, 0, 0))
		return 0;
	struct ev_sock n = {};
	bpf_map_update_elem(&perflab_evsocks, &cookie, &n, BPF_NOEXIST);
	return bpf_map_lookup_elem(&perflab_evsocks, &cookie);
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(perflab_retrans, struct sock *sk)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = bpf_get_socket_cookie(sk);
	if (!recorded_sock(sk, cookie))
		return 0;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	if (!target_tgid(pid))
		pid = 0;
	__u8 st = BPF_CORE_READ((struct sock___ev *)sk, __sk_common.skc_state);
	emit_tcp(sk, cookie, TCP_RETRANS, st, st, pid, now);
	return 0;
}

// perflab_tcprcv runs on every TCP read of every process (in the reader's context): a thread
// with no BPF storage at all is told apart with one load, a thread of another process with one
// storage lookup; a recorded thread's read costs a jiffies read and the socket's own storage
// until its socket is due a snapshot (the clock is read at most once a jiffy per socket).
SEC("tp_btf/tcp_rcv_space_adjust")
int BPF_PROG(perflab_tcprcv, struct sock *sk)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	if (bpf_core_field_exists(cur->bpf_storage) && !cur->bpf_storage)
		return 0;
	if (!bpf_task_storage_get(&perflab_tasks, cur, 0, 0))
		return 0; // not a recorded thread
	struct ev_snap *s = bpf_sk_storage_get(&perflab_evsnap, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!s)
		return 0;
	__u64 j = bpf_jiffies64();
	if (s->check_j == j)
		return 0;
	s->check_j = j;
	__u64 now = bpf_ktime_get_ns();
	if (s->last_ns && now - s->last_ns < snap_every_ns)
		return 0;
	s->last_ns = now;
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	__u64 cookie = bpf_get_socket_cookie(sk);
	__u8 st = BPF_CORE_READ((struct sock___ev *)sk, __sk_common.skc_state);
	emit_tcp(sk, cookie, TCP_SNAP, st, st, pid, now);
	return 0;
}

// process_transition reports whether a change from old to new state happens in the context of
// the process that owns the socket (connect, listen, close), so that the current process
// tells whose socket it is.
static __always_inline bool process_transition(int old, int new)
{
	return (old == ST_CLOSE && (new == ST_SYN_SENT || new == ST_LISTEN)) ||
	       (old == ST_ESTABLISHED && new == ST_FIN_WAIT1) ||
	       (old == ST_CLOSE_WAIT && new == ST_LAST_ACK);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(perflab_tcpstate, struct sock *sk, int oldstate, int newstate)
{
	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 cookie = bpf_get_socket_cookie(sk);
	__u32 pid = bpf_get_current_pid_tgid() >> 32;
	bool mine = process_transition(oldstate, newstate) && target_tgid(pid);
	if (!mine)
		pid = 0;
	if (!mine && !recorded_sock(sk, cookie)) {
		// A connection accepted on a port a recorded process listens on.
		__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);
		if (newstate != ST_SYN_RECV && newstate != ST_ESTABLISHED)
			return 0;
		__u32 *owner = bpf_map_lookup_elem(&perflab_evports, &lport);
		if (!owner)
			return 0;
		pid = *owner;
		mine = true;
	}
	if (mine) {
		struct ev_sock n = {};
		bpf_map_update_elem(&perflab_evsocks, &cookie, &n, BPF_NOEXIST);
	}
	if (newstate == ST_LISTEN && pid) {
		__u16 lport = BPF_CORE_READ(sk, __sk_common.skc_num);
		bpf_map_update_elem(&perflab_evports, &lport, &pid, BPF_ANY);
	}
	emit_tcp(sk, cookie, TCP_STATE, oldstate, newstate, pid, now);
	if (newstate == ST_CLOSE)
		bpf_map_delete_elem(&perflab_evsocks, &cookie);
	return 0;
}
