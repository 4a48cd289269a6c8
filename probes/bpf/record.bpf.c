//go:build ignore

// record.bpf.c: perflab's socket message probe.
//
// One event per send/recv-family system call that touched a socket in a target process:
//
//   raw_syscalls:sys_enter    note the call (op, fd, buffer or iovec pointer, entry time) in the
//                             calling task's local storage, for target processes only;
//   sock:sock_send_length /   the call reached a socket: mark it, take the socket's cookie, sum
//   sock:sock_recv_length     the bytes of each message (sendmmsg/recvmmsg move several), and
//                             announce the socket's identity once per cookie;
//   raw_syscalls:sys_exit     if the call hit a socket, emit one record with the result and the
//                             first bytes of the data (read from the caller's buffers: for a send
//                             the bytes the kernel took, for a receive the bytes it delivered).
//
// read/write/readv/writev on anything that is not a socket never fire the sock tracepoints and
// are dropped at exit without a record. Records go out through a ring buffer without a wakeup
// (BPF_RB_NO_WAKEUP): user space drains it on a short timer, and a record that finds the ring
// more than wakeup_bytes full forces a wakeup. A record that cannot be written is counted in
// the per-CPU "lost" counters.

#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define AF_UNIX 1
#define AF_INET 2
#define AF_INET6 10

#define MAX_PAYLOAD 256
#define MAX_IOV 8
#define UNIX_PATH 108

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
};

// Record kinds.
enum kind {
	KIND_EVENT = 1,
	KIND_CONN = 2,
};

// Lost and produced counters (per-CPU array slots).
enum counter {
	CNT_LOST_EVENTS = 0, // event records that found no room in the ring
	CNT_LOST_CONNS = 1,  // connection records that found no room (retried on the next event)
	CNT_EVENTS = 2,      // event records produced (written + lost)
	CNT_MAX = 4,
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

// inflight is the state of the calling task's current system call.
struct inflight {
	__u64 ts;
	__u64 buf;   // buffer, iovec array, msghdr or mmsghdr array (by op)
	__u64 cnt;   // iovcnt for readv/writev
	__u64 cookie;
	__u64 bytes; // sum of the bytes of each message seen at the sock tracepoints
	__u32 fd;
	__u16 family;
	__u8 op;
	__u8 sock;
	__u16 nmsgs;
	// Kept across calls: the last socket this task used whose identity is known to be sent,
	// so that a thread talking on one socket skips the perflab_conns lookup.
	__u64 known_cookie;
	__u16 known_family;
};

// Programs on tracepoints run with preemption disabled, so a per-CPU scratch buffer is never
// shared by two runs at once.
struct scratch {
	struct event ev;
	__u8 payload[4 * MAX_PAYLOAD]; // room for an offset < 256 plus a masked length < 512
};

struct iovec_u {
	__u64 base;
	__u64 len;
};

// Set by the loader before the programs are loaded.
const volatile __u32 payload_bytes = 64;   // bytes of data per event, <= MAX_PAYLOAD
const volatile __u64 wakeup_bytes = 1 << 20; // force a wakeup when the ring holds this much

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

// Processes whose new children become targets (perflab itself while it starts a command).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u8);
} perflab_spawners SEC(".maps");

// Socket cookies whose identity has been sent.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} perflab_conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct inflight);
} perflab_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} perflab_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct scratch);
} perflab_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct conn);
} perflab_connbuf SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *c = bpf_map_lookup_elem(&perflab_counts, &slot);
	if (c)
		*c += 1;
}

static __always_inline __u64 ring_flags(void)
{
	if (bpf_ringbuf_query(&perflab_events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

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

SEC("tp_btf/sys_enter")
int BPF_PROG(perflab_enter, struct pt_regs *regs, long id)
{
	__u8 op = op_of(id);
	if (op == OP_NONE)
		return 0;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!bpf_map_lookup_elem(&perflab_targets, &tgid))
		return 0;
	struct inflight *f = bpf_task_storage_get(&perflab_inflight, bpf_get_current_task_btf(), 0,
						  BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!f)
		return 0;
	f->ts = bpf_ktime_get_ns();
	f->fd = (__u32)regs->di;
	f->buf = regs->si;
	f->cnt = regs->dx;
	f->cookie = 0;
	f->bytes = 0;
	f->family = 0;
	f->nmsgs = 0;
	f->sock = 0;
	f->op = op;
	return 0;
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
static __always_inline bool announce(struct sock *sk, __u64 cookie, __u64 now)
{
	if (bpf_map_lookup_elem(&perflab_conns, &cookie))
		return true;
	__u32 zero = 0;
	struct conn *c = bpf_map_lookup_elem(&perflab_connbuf, &zero);
	if (!c)
		return false;
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
	__u8 one = 1;
	bpf_map_update_elem(&perflab_conns, &cookie, &one, BPF_ANY);
	return true;
}

static __always_inline int on_sock(struct sock *sk, int ret, bool send)
{
	struct inflight *f = bpf_task_storage_get(&perflab_inflight, bpf_get_current_task_btf(), 0, 0);
	if (!f || f->op == OP_NONE || is_send(f->op) != send)
		return 0;
	if (!f->sock) {
		__u64 cookie = bpf_get_socket_cookie(sk);
		f->sock = 1;
		f->cookie = cookie;
		if (cookie == f->known_cookie) {
			f->family = f->known_family;
		} else {
			f->family = BPF_CORE_READ(sk, __sk_common.skc_family);
			if (announce(sk, cookie, f->ts)) {
				f->known_cookie = cookie;
				f->known_family = f->family;
			}
		}
	}
	if (ret > 0) {
		f->bytes += ret;
		f->nmsgs++;
	}
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

// copy_iov copies up to want bytes from an iovec array into dst, returning the bytes copied.
static __always_inline __u32 copy_iov(__u8 *dst, __u64 iov, __u64 cnt, __u32 want)
{
	__u32 off = 0;
	for (int i = 0; i < MAX_IOV; i++) {
		if (i >= cnt || off >= want)
			break;
		struct iovec_u v;
		if (bpf_probe_read_user(&v, sizeof(v), (void *)(iov + i * sizeof(v))) != 0)
			break;
		__u32 n = want - off;
		if (v.len < n)
			n = v.len;
		// The masks are forced with asm: clang drops them when it can prove the bounds, and
		// the verifier then sees the unmasked register.
		__u64 o = off, sz = n;
		asm volatile("%0 &= 0xff" : "+r"(o));
		asm volatile("%0 &= 0x1ff" : "+r"(sz));
		if (bpf_probe_read_user(dst + o, sz, (void *)v.base) != 0)
			break;
		off += n;
	}
	return off;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(perflab_exit, struct pt_regs *regs, long ret)
{
	__u8 op = op_of(regs->orig_ax);
	if (op == OP_NONE)
		return 0;
	struct inflight *f = bpf_task_storage_get(&perflab_inflight, bpf_get_current_task_btf(), 0, 0);
	if (!f || f->op != op)
		return 0;
	f->op = OP_NONE;
	if (!f->sock)
		return 0;

	count(CNT_EVENTS);
	__u32 zero = 0;
	struct scratch *s = bpf_map_lookup_elem(&perflab_scratch, &zero);
	if (!s)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct event *e = &s->ev;
	e->kind = KIND_EVENT;
	e->op = op;
	e->family = f->family;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->ts = f->ts;
	e->dur = now - f->ts;
	e->cookie = f->cookie;
	e->fd = f->fd;
	e->_pad = 0;
	e->nmsgs = 1;
	e->ret = ret;

	// Bytes and the length of the first message.
	__u64 first = ret > 0 ? ret : 0;
	__u64 iov = 0, cnt = 0;
	switch (op) {
	case OP_SENDMMSG:
	case OP_RECVMMSG: {
		e->nmsgs = ret > 0 ? ret : 0;
		if (ret >= 0)
			e->ret = f->bytes;
		__u32 len0 = 0;
		bpf_probe_read_user(&len0, sizeof(len0), (void *)(f->buf + 56)); // mmsghdr[0].msg_len
		first = ret > 0 ? len0 : 0;
		bpf_probe_read_user(&iov, sizeof(iov), (void *)(f->buf + 16)); // msg_hdr.msg_iov
		bpf_probe_read_user(&cnt, sizeof(cnt), (void *)(f->buf + 24)); // msg_hdr.msg_iovlen
		break;
	}
	case OP_SENDMSG:
	case OP_RECVMSG:
		bpf_probe_read_user(&iov, sizeof(iov), (void *)(f->buf + 16));
		bpf_probe_read_user(&cnt, sizeof(cnt), (void *)(f->buf + 24));
		break;
	case OP_READV:
	case OP_WRITEV:
		iov = f->buf;
		cnt = f->cnt;
		break;
	}

	__u32 want = payload_bytes;
	if (want > MAX_PAYLOAD)
		want = MAX_PAYLOAD;
	if (first < want)
		want = first;
	__u32 got = 0;
	if (want > 0) {
		if (iov == 0 && cnt == 0 && (op == OP_READ || op == OP_WRITE || op == OP_SENDTO || op == OP_RECVFROM)) {
			__u64 sz = want;
			asm volatile("%0 &= 0x1ff" : "+r"(sz));
			if (bpf_probe_read_user(s->payload, sz, (void *)f->buf) == 0)
				got = want;
		} else {
			got = copy_iov(s->payload, iov, cnt, want);
		}
	}
	if (got > MAX_PAYLOAD)
		got = MAX_PAYLOAD;
	e->payload_len = got;
	__u64 size = got;
	asm volatile("%0 &= 0x1ff" : "+r"(size));

	if (bpf_ringbuf_output(&perflab_events, s, sizeof(struct event) + size, ring_flags()) != 0)
		count(CNT_LOST_EVENTS);
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
