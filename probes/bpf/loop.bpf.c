//go:build ignore

// loop.bpf.c: the wait calls of event loops (perflab record's loop probe).
//
// One event per epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll, select, pselect6 or
// io_uring_enter of a thread of a target process: its start, duration and result (ready
// descriptors, completions, or -errno). An event loop blocks in one of these at the top of
// every cycle, so the events are the cycle boundaries that perflab analyze's loop analysis
// needs.
//
// Two ways in, chosen by the loader:
//
//   tracepoint/syscalls/sys_{enter,exit}_<call>   the default: a program runs only on the
//                                                 eight wait calls, so other processes pay
//                                                 the target test on their wait calls alone
//                                                 (plus the syscall slow path that any syscall
//                                                 tracepoint switches on); needs tracefs.
//   tp_btf/sys_enter, tp_btf/sys_exit              without tracefs: runs on every system call
//                                                 of every process, the target test first.
//
// The target test: a thread that entered a wait call of a target process has task local
// storage here; any other thread costs one lookup in perflab_targets (shared with the base
// object). The record is a struct event (common.h) of kind KIND_WAIT: no socket, no payload.
// Its ring buffer, target map and counters are the base object's (MapReplacements).

#include "vmlinux_min.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define PERFLAB_SELF_TIMING
#include "common.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

// wait is a thread's wait call in progress.
struct wait {
	__u64 ts; // entry, CLOCK_MONOTONIC ns; 0 when not in a wait call
	__u8 op;
	struct event ev; // the record being put together
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wait);
} perflab_waits SEC(".maps");


// wait_op maps an x86-64 system call number to a wait op, OP_NONE for any other call.
static __always_inline __u8 wait_op(long nr)
{
	switch (nr) {
	case 7:
		return OP_POLL;
	case 23:
		return OP_SELECT;
	case 232:
		return OP_EPOLL_WAIT;
	case 270:
		return OP_PSELECT6;
	case 271:
		return OP_PPOLL;
	case 281:
		return OP_EPOLL_PWAIT;
	case 426:
		return OP_IO_URING_ENTER;
	case 441:
		return OP_EPOLL_PWAIT2;
	}
	return OP_NONE;
}

static __always_inline int enter(__u8 op)
{
	struct timing tm;
	timing_start(&tm);
	struct task_struct *cur = bpf_get_current_task_btf();
	struct wait *w = bpf_task_storage_get(&perflab_waits, cur, 0, 0);
	if (!w) {
		if (!is_target_tgid())
			return 0;
		w = bpf_task_storage_get(&perflab_waits, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!w)
			return 0;
	}
	w->ts = bpf_ktime_get_ns();
	w->op = op;
	timing_end(&tm);
	return 0;
}

// leave emits the wait call that returns. A call whose entry was not seen (it began before the
// probe was attached: a loop blocked in its wait call when recording starts) is emitted with
// no duration, at its return, so that the cycle it ends is not lost.
static __always_inline int leave(__u8 op, long ret)
{
	struct timing tm;
	timing_start(&tm);
	struct task_struct *cur = bpf_get_current_task_btf();
	struct wait *w = bpf_task_storage_get(&perflab_waits, cur, 0, 0);
	__u64 now = bpf_ktime_get_ns();
	if (!w) {
		if (!is_target_tgid())
			return 0;
		w = bpf_task_storage_get(&perflab_waits, cur, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!w)
			return 0;
		w->ts = 0;
	}
	if (!w->ts || w->op != op)
		w->ts = now;
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct event *e = &w->ev;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = KIND_WAIT;
	e->op = op;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->ts = w->ts;
	e->dur = now - w->ts;
	e->ret = ret;
	e->nmsgs = 1;
	w->ts = 0;
	count(CNT_EVENTS);
	if (bpf_ringbuf_output(&perflab_events, e, sizeof(*e), ring_flags()) != 0)
		count(CNT_LOST_EVENTS);
	timing_end(&tm);
	return 0;
}

// The syscall tracepoints' records (include/trace/events/syscalls.h): the common fields, then
// the system call number and its arguments or its result.
struct sys_enter_args {
	__u64 common;
	int nr;
	__u32 _pad;
	__u64 args[6];
};

struct sys_exit_args {
	__u64 common;
	int nr;
	__u32 _pad;
	long ret;
};

#define WAIT_TRACEPOINTS(call, OP)                                                  \
	SEC("tracepoint/syscalls/sys_enter_" #call)                                \
	int perflab_enter_##call(struct sys_enter_args *ctx) { return enter(OP); } \
	SEC("tracepoint/syscalls/sys_exit_" #call)                                 \
	int perflab_exit_##call(struct sys_exit_args *ctx) { return leave(OP, ctx->ret); }

WAIT_TRACEPOINTS(epoll_wait, OP_EPOLL_WAIT)
WAIT_TRACEPOINTS(epoll_pwait, OP_EPOLL_PWAIT)
WAIT_TRACEPOINTS(epoll_pwait2, OP_EPOLL_PWAIT2)
WAIT_TRACEPOINTS(poll, OP_POLL)
WAIT_TRACEPOINTS(ppoll, OP_PPOLL)
WAIT_TRACEPOINTS(select, OP_SELECT)
WAIT_TRACEPOINTS(pselect6, OP_PSELECT6)
WAIT_TRACEPOINTS(io_uring_enter, OP_IO_URING_ENTER)

SEC("tp_btf/sys_enter")
int BPF_PROG(perflab_sys_enter, struct pt_regs *regs, long id)
{
	__u8 op = wait_op(id);
	if (op == OP_NONE)
		return 0;
	return enter(op);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(perflab_sys_exit, struct pt_regs *regs, long ret)
{
	__u8 op = wait_op(BPF_CORE_READ(regs, orig_ax));
	if (op == OP_NONE)
		return 0;
	return leave(op, ret);
}
