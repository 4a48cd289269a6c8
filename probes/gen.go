package probes

// The eBPF objects are generated from bpf/*.bpf.c and committed, so that building and testing
// perflab needs no C compiler. `make generate` regenerates them (it installs clang when missing).
// The probes read x86-64 system call registers, so only the amd64 object is built.

//go:generate go tool bpf2go -tags linux -target amd64 -type event -type conn record bpf/record.bpf.c -- -O2 -g -Wall
//go:generate go tool bpf2go -tags linux -target amd64 loop bpf/loop.bpf.c -- -O2 -g -Wall
//go:generate go tool bpf2go -tags linux -target amd64 -type uevent -type uspec uprobe bpf/uprobe.bpf.c -- -O2 -g -Wall
//go:generate go tool bpf2go -tags linux -target amd64 -type sched_rec -type tcp_rec evidence bpf/evidence.bpf.c -- -O2 -g -Wall
