// Minimal kernel type definitions for perflab's probes. Every struct is marked
// preserve_access_index, so field offsets are relocated against the running kernel's BTF
// (CO-RE) at load time: only the names and types of the fields used here matter, not their
// order or the structs' sizes. This avoids committing a multi-megabyte vmlinux.h.
#ifndef PERFLAB_VMLINUX_MIN_H
#define PERFLAB_VMLINUX_MIN_H

typedef signed char __s8;
typedef unsigned char __u8;
typedef short __s16;
typedef unsigned short __u16;
typedef int __s32;
typedef unsigned int __u32;
typedef long long __s64;
typedef unsigned long long __u64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u64 __be64;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_LRU_HASH = 9,
	BPF_MAP_TYPE_SK_STORAGE = 24,
	BPF_MAP_TYPE_RINGBUF = 27,
	BPF_MAP_TYPE_TASK_STORAGE = 29,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_F_NO_PREALLOC = 1,
	BPF_RB_NO_WAKEUP = 1,
	BPF_RB_FORCE_WAKEUP = 2,
	BPF_RB_AVAIL_DATA = 0,
	BPF_LOCAL_STORAGE_GET_F_CREATE = 1,
	BPF_SK_STORAGE_GET_F_CREATE = 1,
};

struct in6_addr {
	__u8 s6_addr[16];
};

struct pt_regs {
	unsigned long r10;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	void *bpf_storage; // the task's BPF local storage, NULL when it has none
} __attribute__((preserve_access_index));

typedef struct {
	__s64 counter;
} atomic64_t;

struct sock_common {
	atomic64_t skc_cookie; // the socket cookie, 0 until one is asked for
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_type;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

struct sockaddr_un {
	unsigned short sun_family;
	char sun_path[108];
} __attribute__((preserve_access_index));

struct unix_address {
	int len;
	struct sockaddr_un name[0];
} __attribute__((preserve_access_index));

struct unix_sock {
	struct sock sk;
	struct unix_address *addr;
	struct sock *peer;
} __attribute__((preserve_access_index));

#endif
