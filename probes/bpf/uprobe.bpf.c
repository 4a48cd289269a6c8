//go:build ignore

// uprobe.bpf.c: messages seen at functions in user space.
//
// Two programs serve every attached function, told apart by the attach cookie, which indexes
// perflab_uspecs (struct uspec: which argument is the buffer, where the length is, which
// direction). perflab attaches them to OpenSSL's SSL_write, SSL_read, SSL_write_ex and
// SSL_read_ex (TLS plaintext) and to the functions named by record --uprobe.
//
//   uprobe    perflab_uentry: the call starts. A thread of a target process notes the buffer,
//             the length argument and the time in its task storage; a spec without a return
//             probe (Go functions: a uretprobe rewrites the return address on a stack the Go
//             runtime may move) emits its record here.
//   uretprobe perflab_uret: the call returns. The length is the return value, the argument, or
//             what the size_t an argument points to holds (SSL_*_ex); the record is emitted
//             with the first bytes of the buffer (for a receive they are there only now).
//   sock:sock_send_length / sock:sock_recv_length   perflab_usock: a socket moved bytes inside
//             a TLS call of the same thread: the call's socket cookie, so that its plaintext
//             goes on the connection that carries its ciphertext. The socket is remembered per
//             SSL object, for reads that OpenSSL serves from what it has already received.
//
// Failed calls (a length below zero, SSL_*_ex returning 0) are not messages and emit nothing.

#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 payload_bytes = 64; // bytes of data per record, <= MAX_PAYLOAD (set by the loader)

// The user registers at a probe. The ___uprobe suffix keeps its CO-RE name pt_regs.
struct pt_regs___uprobe {
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long bx;
} __attribute__((preserve_access_index));

// Where a call's length is (struct uspec.len_src).
enum len_src {
	LEN_ARG = 1,   // argument len_arg
	LEN_RET = 2,   // the return value, an int
	LEN_RET64 = 3, // the return value, 64 bits (ssize_t)
	LEN_DEREF = 4, // the size_t argument len_arg points to, when the return value is 1 (SSL_*_ex)
};

// Operations of struct uevent (user space maps them to trace.Op).
enum uop {
	UOP_TLS_WRITE = 1,
	UOP_TLS_READ = 2,
	UOP_SEND = 3,
	UOP_RECV = 4,
};

// uspec is one attached function's layout, set by user space.
struct uspec {
	__u8 op;       // enum uop
	__u8 go;       // 1: arguments in the Go register ABI (ax, bx, cx, di, si, r8..r11)
	__u8 buf_arg;  // argument holding the buffer, from 1
	__u8 len_src;  // enum len_src
	__u8 len_arg;  // argument holding the length (or its pointer), from 1
	__u8 key_arg;  // argument naming the connection (the SSL *, a socket handle), 0 for none
	__u8 entry;    // 1: emit at entry (no return probe)
	__u8 tls;      // 1: take the socket cookie from the socket calls inside the call
};

// uevent is one message seen at a function. Followed by payload_len bytes of data.
struct uevent {
	__u8 kind; // KIND_UEVENT
	__u8 op;   // enum uop
	__u16 payload_len;
	__u32 pid;
	__u32 tid;
	__u32 spec;   // the attach cookie: index in perflab_uspecs
	__u64 ts;     // CLOCK_MONOTONIC ns at entry
	__u64 dur;    // ns from entry to return, 0 for entry probes
	__u64 cookie; // socket cookie of a TLS call, 0 when none was seen
	__u64 key;    // the key argument's value (the SSL *), 0 when none
	__s64 len;    // bytes of the message
};

struct uscratch {
	struct uevent ev;
	__u8 payload[2 * MAX_PAYLOAD];
};

// ucall is a thread's call in progress, in its task local storage.
struct ucall {
	__u64 active; // 1 between entry and return
	__u64 spec;
	__u64 ts;
	__u64 buf;
	__u64 len; // the length argument, or the pointer to it
	__u64 key;
	__u64 cookie;
	struct uscratch out;
};

struct sslkey {
	__u32 tgid;
	__u32 _pad;
	__u64 ssl;
};

struct {
	__uint(type, 2); // BPF_MAP_TYPE_ARRAY
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct uspec);
} perflab_uspecs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct ucall);
} perflab_ucalls SEC(".maps");

// The socket last seen under each SSL object.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct sslkey);
	__type(value, __u64);
} perflab_sslsocks SEC(".maps");

static __always_inline __u64 arg(struct pt_regs___uprobe *r, bool go, __u8 n)
{
	if (go) {
		switch (n) {
		case 1:
			return BPF_CORE_READ(r, ax);
		case 2:
			return BPF_CORE_READ(r, bx);
		case 3:
			return BPF_CORE_READ(r, cx);
		case 4:
			return BPF_CORE_READ(r, di);
		case 5:
			return BPF_CORE_READ(r, si);
		case 6:
			return BPF_CORE_READ(r, r8);
		case 7:
			return BPF_CORE_READ(r, r9);
		case 8:
			return BPF_CORE_READ(r, r10);
		case 9:
			return BPF_CORE_READ(r, r11);
		}
		return 0;
	}
	switch (n) {
	case 1:
		return BPF_CORE_READ(r, di);
	case 2:
		return BPF_CORE_READ(r, si);
	case 3:
		return BPF_CORE_READ(r, dx);
	case 4:
		return BPF_CORE_READ(r, cx);
	case 5:
		return BPF_CORE_READ(r, r8);
	case 6:
		return BPF_CORE_READ(r, r9);
	}
	return 0;
}

static __always_inline bool target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	return bpf_map_lookup_elem(&perflab_targets, &tgid) != 0;
}

// uemit writes c's record: a message of len bytes in buf, seen from start to end.
static __noinline int uemit(struct ucall *c, struct uspec *s, __u64 start, __u64 end, __s64 len)
{
	if (!c || !s)
		return 0;
	count(CNT_UPROBE_EVENTS);
	struct uscratch *o = &c->out;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	o->ev.kind = KIND_UEVENT;
	o->ev.op = s->op;
	o->ev.pid = pid_tgid >> 32;
	o->ev.tid = (__u32)pid_tgid;
	o->ev.spec = c->spec;
	o->ev.ts = start;
	o->ev.dur = end - start;
	o->ev.cookie = c->cookie;
	o->ev.key = c->key;
	o->ev.len = len;
	__u32 want = payload_bytes;
	if (want > MAX_PAYLOAD)
		want = MAX_PAYLOAD;
	if (len < want)
		want = len;
	__u32 got = 0;
	if (want > 0) {
		__u64 sz = want;
		asm volatile("%0 &= 0x1ff" : "+r"(sz));
		if (bpf_probe_read_user(o->payload, sz, (void *)c->buf) == 0)
			got = want;
	}
	if (got > MAX_PAYLOAD)
		got = MAX_PAYLOAD;
	o->ev.payload_len = got;
	__u64 size = got;
	asm volatile("%0 &= 0x1ff" : "+r"(size));
	if (bpf_ringbuf_output(&perflab_events, o, sizeof(struct uevent) + size, ring_flags()) != 0)
		count(CNT_LOST_EVENTS);
	return 0;
}

SEC("uprobe")
int perflab_uentry(struct pt_regs *ctx)
{
	if (!target())
		return 0;
	__u32 id = bpf_get_attach_cookie(ctx);
	struct uspec *s = bpf_map_lookup_elem(&perflab_uspecs, &id);
	if (!s)
		return 0;
	struct ucall *c = bpf_task_storage_get(&perflab_ucalls, bpf_get_current_task_btf(), 0,
					       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return 0;
	struct pt_regs___uprobe *r = (void *)ctx;
	bool go = s->go;
	c->spec = id;
	c->ts = bpf_ktime_get_ns();
	c->buf = arg(r, go, s->buf_arg);
	c->len = arg(r, go, s->len_arg);
	c->key = s->key_arg ? arg(r, go, s->key_arg) : 0;
	c->cookie = 0;
	if (s->entry) {
		c->active = 0;
		__s64 len = c->len;
		if (len < 0)
			return 0;
		return uemit(c, s, c->ts, c->ts, len);
	}
	c->active = 1; // a nested call (one hooked function calling another) takes over
	return 0;
}

SEC("uretprobe")
int perflab_uret(struct pt_regs *ctx)
{
	struct ucall *c = bpf_task_storage_get(&perflab_ucalls, bpf_get_current_task_btf(), 0, 0);
	if (!c || !c->active)
		return 0;
	c->active = 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 id = c->spec;
	struct uspec *s = bpf_map_lookup_elem(&perflab_uspecs, &id);
	if (!s)
		return 0;
	__u64 rc = BPF_CORE_READ((struct pt_regs___uprobe *)ctx, ax);
	__s64 len = -1;
	switch (s->len_src) {
	case LEN_ARG:
		len = c->len;
		break;
	case LEN_RET:
		len = (__s32)rc;
		break;
	case LEN_RET64:
		len = rc;
		break;
	case LEN_DEREF:
		if ((__s32)rc == 1) {
			__u64 n = 0;
			if (bpf_probe_read_user(&n, sizeof(n), (void *)c->len) == 0)
				len = n;
		}
		break;
	}
	if (len <= 0 && !(len == 0 && s->len_src == LEN_ARG))
		return 0; // failed (or, for a return value, nothing moved)
	if (s->tls && c->key) {
		struct sslkey k = {.tgid = bpf_get_current_pid_tgid() >> 32, .ssl = c->key};
		if (c->cookie) {
			bpf_map_update_elem(&perflab_sslsocks, &k, &c->cookie, BPF_ANY);
		} else {
			__u64 *ck = bpf_map_lookup_elem(&perflab_sslsocks, &k);
			if (ck)
				c->cookie = *ck;
		}
	}
	return uemit(c, s, c->ts, now, len);
}

static __always_inline int on_usock(struct sock *sk)
{
	struct ucall *c = bpf_task_storage_get(&perflab_ucalls, bpf_get_current_task_btf(), 0, 0);
	if (!c || !c->active)
		return 0;
	c->cookie = bpf_get_socket_cookie(sk);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(perflab_usend, struct sock *sk, int ret, int flags)
{
	return on_usock(sk);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(perflab_urecv, struct sock *sk, int ret, int flags)
{
	return on_usock(sk);
}
