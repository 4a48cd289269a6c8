//go:build ignore

// record.bpf.c: perflab's socket message probe.
//
// One event per send/recv-family system call that moved data through a socket in a target
// process. Every hook is a BTF tracepoint that fires only on socket work or on a context
// switch, so a process that is not recorded pays nothing on its other system calls: a raw
// sys_enter/sys_exit hook (and even a single per-system-call tracepoint) switches every system
// call of every process onto the kernel's slow path, and fentry/fexit need BPF trampolines,
// which some kernels refuse.
//
//   sock:sock_send_length /   a socket moved a message (or failed to). The target test comes
//   sock:sock_recv_length     first: a thread of a target process has task local storage; a
//                             thread without one is looked up in perflab_targets. Which system
//                             call this is, and its fd and buffer, come from the task's system
//                             call registers; only the ten calls of enum op count (not
//                             io_uring, splice or sendfile). The record is emitted here, with
//                             the first bytes of the data, still in the caller's buffers (for a
//                             send the bytes the kernel took, for a receive the bytes it
//                             delivered).
//   tcp:tcp_sendmsg_locked    a TCP send started: the event's start time;
//   sched:sched_switch        a target thread went to sleep inside a send or receive: the
//                             event's start time (the wait is part of the call);
//   sched:sched_process_fork  the children of target processes become targets; exited
//   sched:sched_process_exit  processes leave the map.
//
// A call that neither blocked nor was a TCP send starts, as far as the probe can tell, when the
// socket has moved its bytes: its duration is 0. A thread's first call other than a TCP send
// has no start time either (its storage is created then). sendmmsg and recvmmsg move several
// messages, each seen by the socket tracepoints; their record is emitted at the last one (the
// vlen-th message, or the failed attempt after the last message that ends a short batch), one
// record per call as for the others.
//
// The hot path, measured on the hook (a clock read costs about 40 ns on the VM perflab is
// developed on, a bpf_probe_read_user into a map value or the stack 80-110 ns, into ring
// memory about 20): one task storage lookup (the target test and the thread's state), the
// system call registers, one clock read, the socket (the socket of the thread's last send, or
// last receive, is recognised by its cookie, read straight from the socket, and costs nothing
// more; any other is found in its own local storage, which holds its cookie, family and whether
// its identity was sent: no hash lookup however many sockets a thread alternates between), then
// a ring-buffer reservation that the record and its payload head are written
// into directly. Records are submitted without a wakeup (BPF_RB_NO_WAKEUP): user space drains
// the ring on a short timer, and one record in wakeup_mask+1 of a CPU looks at the ring's fill
// and forces a wakeup when it holds wakeup_bytes. A record that finds no room is counted in
// the per-CPU "lost" counters.

#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define PERFLAB_SELF_TIMING
#include "common.h"

#define MAX_IOV 8
#define UNIX_PATH 108

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// conn is the identity of a socket, sent once per socket cookie.
struct conn {
	__u8 kind;
	__u8 _pad0;
	__u16 family;
	__u16 protocol;
	__u16 type;
	__u32 pid;
	__u16 lport;
	__u16 rport;
	__u64 cookie;
	__u64 ts;
	__u8 laddr[16];
	__u8 raddr[16];
	__u16 lpath_len;
	__u16 rpath_len;
	__u32 _pad1;
	char lpath[UNIX_PATH];
	char rpath[UNIX_PATH];
};

// task is the state of one thread of a target process, in its task local storage. It also
// holds the record being put together: tracepoint programs may be preempted on a fully
// preemptible kernel, so a per-CPU buffer could be overwritten by another task's run on the
// same CPU; a task's own storage cannot.
struct task {
	__u64 send_ts;  // start of the current TCP send, 0 when none
	__u64 block_ts; // when the thread went to sleep in its current call, 0 when it did not
	__u32 block_fd; // that call's fd
	__u32 block_nr; // and system call number
	// The socket of the record being put together.
	__u64 cur_cookie;
	__u16 cur_family;
	// A sendmmsg/recvmmsg batch being summed.
	__u16 mm_family;
	__u32 mm_fd;
	__u64 mm_buf; // the mmsghdr array, 0 when no batch is open
	__u64 mm_start;
	__u64 mm_bytes;
	__u64 mm_first; // bytes of the first message
	__u64 mm_cookie;
	__u16 mm_idx;   // messages seen
	__u8 mm_op;
	// The sockets of the thread's last send and last receive whose identity is in the ring,
	// by cookie (never reused, so a socket freed and another allocated in its place cannot
	// match), with their family: a thread that keeps to its sockets finds them here without a
	// socket storage lookup.
	__u16 send_family;
	__u16 recv_family;
	__u64 send_cookie;
	__u64 recv_cookie;
	__u64 regs; // the thread's saved user registers (struct pt_regs *), fixed for its life; 0 until first needed
	struct event ev; // the fixed part of the record being put together
	struct conn conn;
};

struct iovec_u {
	__u64 base;
	__u64 len;
};

// Set by the loader before the programs are loaded.
const volatile __u32 payload_bytes = 64;   // bytes of data per event, <= MAX_PAYLOAD
const volatile __u32 payload_room = 64;    // a power of two >= payload_bytes (0 when it is 0)


// sockinfo is what the probes keep about a socket, in its socket local storage: found in the
// socket itself, with no hash lookup however many sockets a thread alternates between.
struct sockinfo {
	__u64 cookie;    // bpf_get_socket_cookie
	__u16 family;
	__u8 announced;  // its identity (struct conn) is in the ring
	__u8 _pad[5];
};

// Processes whose new children become targets (perflab itself while it starts a command).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u8);
} perflab_spawners SEC(".maps");

// The sockets target threads used (socket local storage, freed with the map or the socket).
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sockinfo);
} perflab_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task);
} perflab_tasks SEC(".maps");


// op_of maps an x86-64 system call number to an op.
static __always_inline __u8 op_of(long id)
{
	switch (id) {
	case 0:
		return OP_READ;
	case 1:
		return OP_WRITE;
	case 19:
		return OP_READV;
	case 20:
		return OP_WRITEV;
	case 44:
		return OP_SENDTO;
	case 45:
		return OP_RECVFROM;
	case 46:
		return OP_SENDMSG;
	case 47:
		return OP_RECVMSG;
	case 299:
		return OP_RECVMMSG;
	case 307:
		return OP_SENDMMSG;
	}
	return OP_NONE;
}

static __always_inline bool is_send(__u8 op)
{
	return op == OP_SENDTO || op == OP_SENDMSG || op == OP_SENDMMSG || op == OP_WRITE ||
	       op == OP_WRITEV;
}

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

// regs_of returns the saved user registers of task, whose state is t. Where they are is fixed
// for the thread's life, so it is asked of the kernel once (bpf_task_pt_regs) and kept in t;
// after that they are read through a read-only cast of the kept address, with no helper call
// (the cast is a register move once verified; its loads are the JIT's guarded loads).
static __always_inline struct pt_regs *regs_of(struct task *t, struct task_struct *task)
{
	if (!t->regs) {
		struct pt_regs *r = (struct pt_regs *)bpf_task_pt_regs(task);
		if (!r)
			return 0;
		t->regs = (__u64)r;
	}
	return bpf_rdonly_cast((void *)t->regs, bpf_core_type_id_kernel(struct pt_regs));
}

static __always_inline void copy_unix_path(struct sock *sk, char *dst, __u16 *len)
{
	struct unix_address *addr = BPF_CORE_READ((struct unix_sock *)sk, addr);
	if (!addr)
		return;
	int n = BPF_CORE_READ(addr, len) - 2; // minus sun_family
	if (n <= 0)
		return;
	if (n > UNIX_PATH)
		n = UNIX_PATH;
	// A constant size keeps the verifier simple; bytes past n are ignored by user space.
	bpf_probe_read_kernel(dst, UNIX_PATH, &addr->name[0].sun_path);
	*len = n;
}

// announce sends the identity of sk once per cookie. It returns whether the identity has been
// sent (now or before).
static __noinline bool announce(struct task *t, struct sock *sk, __u64 cookie, __u64 now)
{
	if (!t)
		return false;
	struct conn *c = &t->conn;
	__builtin_memset(c, 0, sizeof(*c));
	c->kind = KIND_CONN;
	c->cookie = cookie;
	c->ts = now;
	c->pid = bpf_get_current_pid_tgid() >> 32;
	c->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	c->protocol = BPF_CORE_READ(sk, sk_protocol);
	c->type = BPF_CORE_READ(sk, sk_type);
	if (c->family == AF_INET) {
		__be32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__be32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(c->laddr, &s, 4);
		__builtin_memcpy(c->raddr, &d, 4);
		c->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
		c->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (c->family == AF_INET6) {
		BPF_CORE_READ_INTO(&c->laddr, sk, __sk_common.skc_v6_rcv_saddr);
		BPF_CORE_READ_INTO(&c->raddr, sk, __sk_common.skc_v6_daddr);
		c->lport = BPF_CORE_READ(sk, __sk_common.skc_num);
		c->rport = __builtin_bswap16(BPF_CORE_READ(sk, __sk_common.skc_dport));
	} else if (c->family == AF_UNIX) {
		copy_unix_path(sk, c->lpath, &c->lpath_len);
		struct sock *peer = BPF_CORE_READ((struct unix_sock *)sk, peer);
		if (peer)
			copy_unix_path(peer, c->rpath, &c->rpath_len);
	}
	if (bpf_ringbuf_output(&perflab_events, c, sizeof(*c), ring_flags()) != 0) {
		count(CNT_LOST_CONNS);
		return false;
	}
	return true;
}

// copy_iov copies up to want (<= payload_room) bytes from an iovec array into dst, which has
// room for 2 * payload_room bytes, returning the bytes copied.
static __always_inline __u32 copy_iov(__u8 *dst, __u64 iov, __u64 cnt, __u32 want)
{
	__u32 off = 0;
	for (int i = 0; i < MAX_IOV; i++) {
		if (i >= cnt || off >= want)
			break;
		struct iovec_u v;
		if (bpf_probe_read_user(&v, sizeof(v), (void *)(iov + i * sizeof(v))) != 0)
			break;
		__u64 n = want - off;
		if (v.len < n)
			n = v.len;
		// off < want <= payload_room and n <= payload_room, which the verifier must see:
		// the bounds are forced with asm, as clang drops what it can prove itself.
		__u64 o = off, room = payload_room;
		asm volatile("%0 &= %1" : "+r"(o) : "r"(room - 1));
		asm volatile("" : "+r"(n));
		if (n > room)
			n = room;
		if (bpf_probe_read_user(dst + o, n, (void *)v.base) != 0)
			break;
		off += n;
	}
	return off;
}

// The data is copied straight into the ring's memory: bpf_probe_read_user into a map value or
// the stack costs three to four times as much (the kernel's hardened usercopy checks of the
// destination), measured on the hook.

// emit_flat writes the record put together in t->ev, with the first want bytes at buf.
static __always_inline int emit_flat(struct task *t, __u64 buf, __u32 want, __u64 n)
{
	struct event *e = bpf_ringbuf_reserve(&perflab_events, sizeof(struct event) + payload_room, 0);
	if (!e) {
		count(CNT_LOST_EVENTS);
		return 0;
	}
	*e = t->ev;
	e->payload_len = 0;
	__u64 sz = want;
	asm volatile("" : "+r"(sz));
	if (sz > payload_room)
		sz = payload_room;
	if (sz > 0 && bpf_probe_read_user((void *)(e + 1), sz, (void *)buf) == 0)
		e->payload_len = sz;
	bpf_ringbuf_submit(e, ring_flags_nth(n));
	return 0;
}

// emit_iov writes the record put together in t->ev, with the first want bytes of the iovec
// array iov of cnt entries.
static __always_inline int emit_iov(struct task *t, __u64 iov, __u64 cnt, __u32 want, __u64 n)
{
	struct event *e = bpf_ringbuf_reserve(&perflab_events, sizeof(struct event) + 2 * payload_room, 0);
	if (!e) {
		count(CNT_LOST_EVENTS);
		return 0;
	}
	*e = t->ev;
	e->payload_len = 0;
	if (want > 0)
		e->payload_len = copy_iov((__u8 *)(e + 1), iov, cnt, want);
	bpf_ringbuf_submit(e, ring_flags_nth(n));
	return 0;
}

// emit writes the event record put together in t->ev, with the first bytes of its data:
// first is the length of the first message, buf and cnt the call's buffer arguments.
static __noinline int emit(struct task *t, __u64 buf, __u64 cnt, __u64 first)
{
	if (!t)
		return 0;
	__u64 n = count(CNT_EVENTS);
	__u8 op = t->ev.op;
	__u32 want = payload_bytes;
	if (first < want)
		want = first;
	if (op == OP_READ || op == OP_WRITE || op == OP_SENDTO || op == OP_RECVFROM)
		return emit_flat(t, buf, want, n);
	__u64 iov = buf;
	if (op != OP_READV && op != OP_WRITEV) {
		// sendmsg, recvmsg and the first message of sendmmsg, recvmmsg: the (user_)msghdr
		// has msg_iov at 16, msg_iovlen at 24.
		struct {
			__u64 iov, len;
		} m = {};
		bpf_probe_read_user(&m, sizeof(m), (void *)(buf + 16));
		iov = m.iov;
		cnt = m.len;
	}
	return emit_iov(t, iov, cnt, want, n);
}

// set_event fills the fixed part of t's event record.
static __always_inline void set_event(struct task *t, struct task_struct *cur, __u8 op, __u64 start,
				      __u64 end, __s64 ret, __u16 nmsgs, __u32 fd)
{
	struct event *e = &t->ev;
	e->kind = KIND_EVENT;
	e->op = op;
	e->family = t->cur_family;
	e->pid = cur->tgid;
	e->tid = cur->pid;
	e->ts = start;
	e->dur = end - start;
	e->cookie = t->cur_cookie;
	e->fd = fd;
	e->_pad = 0;
	e->nmsgs = nmsgs;
	e->ret = ret;
}

// emit_direct writes the record of a call with a flat buffer (read, write, sendto, recvfrom)
// straight into its ring reservation, with the first bytes of the data at buf: the common
// case, with no record put together in task storage first and no call of a BPF function.
static __always_inline int emit_direct(struct task_struct *cur, __u8 op, __u16 family, __u64 start,
				       __u64 end, __u64 cookie, __s64 ret, __u32 fd, __u64 buf)
{
	__u64 n = count(CNT_EVENTS);
	struct event *e = bpf_ringbuf_reserve(&perflab_events, sizeof(struct event) + payload_room, 0);
	if (!e) {
		count(CNT_LOST_EVENTS);
		return 0;
	}
	e->kind = KIND_EVENT;
	e->op = op;
	e->family = family;
	e->payload_len = 0;
	e->nmsgs = 1;
	e->pid = cur->tgid;
	e->tid = cur->pid;
	e->ts = start;
	e->dur = end - start;
	e->cookie = cookie;
	e->ret = ret;
	e->fd = fd;
	e->_pad = 0;
	__u64 sz = payload_bytes;
	if (ret < (__s64)sz)
		sz = ret > 0 ? ret : 0;
	asm volatile("" : "+r"(sz));
	if (sz > payload_room)
		sz = payload_room;
	if (sz > 0 && bpf_probe_read_user((void *)(e + 1), sz, (void *)buf) == 0)
		e->payload_len = sz;
	bpf_ringbuf_submit(e, ring_flags_nth(n));
	return 0;
}

// flush_mm emits the sendmmsg/recvmmsg record being summed, if any.
static __always_inline int flush_mm(struct task *t, struct task_struct *cur, __u64 now)
{
	if (!t->mm_buf)
		return 0;
	__u64 buf = t->mm_buf;
	t->mm_buf = 0;
	t->cur_cookie = t->mm_cookie;
	t->cur_family = t->mm_family;
	set_event(t, cur, t->mm_op, t->mm_start, now, t->mm_bytes, t->mm_idx, t->mm_fd);
	return emit(t, buf, 0, t->mm_first);
}

// has_storage reports whether a task may have local storage: a task with none at all (every
// task of a process that is not recorded, unless another BPF tool gave it some) is told apart
// with one load, without the cost of a storage lookup (about 60 ns measured on the hook).
static __always_inline bool has_storage(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->bpf_storage))
		return true;
	return task->bpf_storage != 0;
}

// task_of returns the calling thread's state when it belongs to a target process. Threads of
// target processes get their storage at their first socket message; any other thread costs
// one lookup in perflab_targets.
static __always_inline struct task *task_of(struct task_struct *cur)
{
	if (has_storage(cur)) {
		struct task *t = bpf_task_storage_get(&perflab_tasks, cur, 0, 0);
		if (t)
			return t;
	}
	if (!is_target_tgid()) {
		count(CNT_OTHER);
		return 0;
	}
	return bpf_task_storage_get(&perflab_tasks, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline int on_target(struct task *t, struct task_struct *cur, struct sock *sk, int ret,
				     bool send);

static __always_inline int on_sock(struct sock *sk, int ret, bool send)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task *t = task_of(cur);
	if (!t)
		return 0;
	struct timing tm;
	timing_start(&tm);
	on_target(t, cur, sk, ret, send);
	timing_end(&tm);
	return 0;
}

// sock_of returns what the probes keep about sk, created (cookie and family read once) at the
// socket's first message; or 0 when the kernel had no memory for it.
static __always_inline struct sockinfo *sock_of(struct sock *sk)
{
	struct sockinfo *si = bpf_sk_storage_get(&perflab_socks, sk, 0, 0);
	if (si)
		return si;
	si = bpf_sk_storage_get(&perflab_socks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!si)
		return 0;
	si->cookie = bpf_get_socket_cookie(sk);
	si->family = sk->__sk_common.skc_family;
	return si;
}

// on_target handles a socket message of a target thread.
static __always_inline int on_target(struct task *t, struct task_struct *cur, struct sock *sk, int ret,
				     bool send)
{
	__u64 send_ts = t->send_ts, block_ts = t->block_ts;
	__u32 block_nr = t->block_nr, block_fd = t->block_fd;
	t->send_ts = 0;
	t->block_ts = 0;
	struct pt_regs *regs = regs_of(t, cur);
	if (!regs)
		return 0;
	long nr = regs->orig_ax;
	__u8 op = op_of(nr);
	if (op == OP_NONE || is_send(op) != send)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 fd = regs->di;
	__u64 buf = regs->si, cnt = regs->dx;

	__u64 start = now;
	if (block_ts && block_nr == nr && block_fd == fd && block_ts <= now)
		start = block_ts;
	if (send_ts && send_ts < start)
		start = send_ts;

	if (t->mm_buf && (t->mm_op != op || t->mm_buf != buf))
		flush_mm(t, cur, now); // a batch that ended without its end being seen

	struct sockinfo *si;
	__u64 cookie;
	__u16 family;
	__u64 ck = 0;
	if (bpf_core_field_exists(sk->__sk_common.skc_cookie))
		ck = sk->__sk_common.skc_cookie.counter;
	if (ck && ck == (send ? t->send_cookie : t->recv_cookie)) {
		cookie = ck;
		family = send ? t->send_family : t->recv_family;
	} else if ((si = sock_of(sk))) {
		cookie = si->cookie;
		family = si->family;
		if (!si->announced && announce(t, sk, cookie, start))
			si->announced = 1;
		if (si->announced) {
			if (send) {
				t->send_cookie = cookie;
				t->send_family = family;
			} else {
				t->recv_cookie = cookie;
				t->recv_family = family;
			}
		}
	} else {
		// No socket storage: the identity goes with every event of this socket.
		cookie = bpf_get_socket_cookie(sk);
		family = sk->__sk_common.skc_family;
		announce(t, sk, cookie, start);
	}

	if (op == OP_READ || op == OP_WRITE || op == OP_SENDTO || op == OP_RECVFROM)
		return emit_direct(cur, op, family, start, now, cookie, ret, fd, buf);
	if (op != OP_SENDMMSG && op != OP_RECVMMSG) {
		t->cur_cookie = cookie;
		t->cur_family = family;
		set_event(t, cur, op, start, now, ret, 1, fd);
		return emit(t, buf, cnt, ret > 0 ? ret : 0);
	}

	// sendmmsg/recvmmsg: sum the batch's messages.
	if (!t->mm_buf) {
		t->mm_buf = buf;
		t->mm_op = op;
		t->mm_idx = 0;
		t->mm_start = start;
		t->mm_bytes = 0;
		t->mm_first = 0;
		t->mm_fd = fd;
		t->mm_cookie = cookie;
		t->mm_family = family;
	}
	if (ret < 0) {
		if (t->mm_idx > 0)
			return flush_mm(t, cur, now); // the attempt after the last message of a short batch
		t->mm_buf = 0;
		t->cur_cookie = cookie;
		t->cur_family = family;
		set_event(t, cur, op, t->mm_start, now, ret, 0, fd);
		return emit(t, buf, cnt, 0);
	}
	if (t->mm_idx == 0)
		t->mm_first = ret;
	t->mm_bytes += ret;
	t->mm_idx++;
	__u64 vlen = cnt < 1024 ? cnt : 1024; // the kernel caps vlen at UIO_MAXIOV
	if (t->mm_idx >= vlen)
		return flush_mm(t, cur, now);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(perflab_send, struct sock *sk, int ret, int flags)
{
	return on_sock(sk, ret, true);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(perflab_recv, struct sock *sk, int ret, int flags)
{
	return on_sock(sk, ret, false);
}

SEC("tp_btf/tcp_sendmsg_locked")
int BPF_PROG(perflab_tcpsend, struct sock *sk, void *msg, void *skb, int size_goal)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct task *t = 0;
	if (has_storage(cur))
		t = bpf_task_storage_get(&perflab_tasks, cur, 0, 0);
	if (!t) {
		// A target thread's first TCP send creates its storage here, so that send too gets
		// its start time. Stamped at its end instead, its bytes could be read by the peer
		// before the send "started", and merge's clock bounds would exclude the truth.
		if (!is_target_tgid())
			return 0;
		t = bpf_task_storage_get(&perflab_tasks, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!t)
			return 0;
	}
	if (t->send_ts)
		return 0; // a send that started before, and goes on
	struct timing tm;
	timing_start(&tm);
	t->send_ts = bpf_ktime_get_ns();
	timing_end(&tm);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(perflab_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (preempt || prev_state == 0)
		return 0; // still runnable: not waiting
	if (!has_storage(prev))
		return 0;
	struct task *t = bpf_task_storage_get(&perflab_tasks, prev, 0, 0);
	if (!t)
		return 0;
	struct timing tm;
	timing_start(&tm);
	count(CNT_SWITCH);
	if (!t->block_ts) {
		struct pt_regs *regs = regs_of(t, prev);
		long nr = regs ? regs->orig_ax : -1;
		if (regs && op_of(nr) != OP_NONE) {
			t->block_ts = bpf_ktime_get_ns();
			t->block_nr = nr;
			t->block_fd = regs->di;
		}
	}
	timing_end(&tm);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(perflab_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ctgid = child->tgid;
	if (child->pid != ctgid)
		return 0; // a new thread, already covered by its process
	__u32 ptgid = parent->tgid;
	if (!bpf_map_lookup_elem(&perflab_targets, &ptgid) && !bpf_map_lookup_elem(&perflab_spawners, &ptgid))
		return 0;
	__u8 one = 1;
	bpf_map_update_elem(&perflab_targets, &ctgid, &one, BPF_ANY);
	targets_changed();
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(perflab_pexit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	if (p->pid != tgid)
		return 0;
	bpf_map_delete_elem(&perflab_targets, &tgid);
	return 0;
}

// perflab_nop does nothing. It is attached only while perflab measures, at start, what the
// kernel's run-time statistics themselves add to every run (their clock reads), so that this
// can be taken out of the programs' figures.
SEC("tp_btf/sock_send_length")
int BPF_PROG(perflab_nop, struct sock *sk, int ret, int flags)
{
	return 0;
}
