//go:build linux && amd64

package probes

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf/link"

	"github.com/perflab/perflab/trace"
)

// tracefsSyscalls is where tracefs lists the syscall tracepoints.
const tracefsSyscalls = "/sys/kernel/tracing/events/syscalls"

// waitCalls are the system calls the loop probe records, by their tracepoint names.
var waitCalls = []string{"epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "select", "pselect6", "io_uring_enter"}

// waitHook returns the hook the loop probe uses for cfg: the syscall tracepoints when tracefs
// lists them, else the raw sys_enter/sys_exit tracepoints.
func waitHook(cfg Config) string {
	if cfg.WaitHook != "" {
		return cfg.WaitHook
	}
	if _, err := os.Stat(tracefsSyscalls + "/sys_enter_epoll_wait"); err == nil {
		return WaitHookTracepoint
	}
	return WaitHookBTF
}

// openLoop loads bpf/loop.bpf.c on top of the base object (its ring buffer, target map and
// counters), attaches it by the configured hook, and decodes its records.
func (p *Probe) openLoop() error {
	spec, err := loadLoop()
	if err != nil {
		return fmt.Errorf("load loop probe spec: %w", err)
	}
	hook := waitHook(p.cfg)
	for name := range spec.Programs {
		btf := name == "perflab_sys_enter" || name == "perflab_sys_exit"
		if btf != (hook == WaitHookBTF) {
			delete(spec.Programs, name)
		}
	}
	coll, err := p.loadObject(spec) // attaches the tp_btf programs, if they are the hook
	if err != nil {
		return fmt.Errorf("loop probe: %w", err)
	}
	if hook == WaitHookTracepoint {
		for _, call := range waitCalls {
			for _, side := range []string{"enter", "exit"} {
				name, tp := "perflab_"+side+"_"+call, "sys_"+side+"_"+call
				l, err := link.Tracepoint("syscalls", tp, coll.Programs[name], nil)
				if err != nil {
					if errors.Is(err, os.ErrNotExist) && call != "epoll_wait" {
						continue // a kernel without this call (epoll_pwait2 before 5.11, io_uring off)
					}
					return fmt.Errorf("attach %s to syscalls:%s: %w", name, tp, err)
				}
				p.addLink(l, spec.Programs[name].SectionName)
			}
		}
	}
	p.registerKind(kindWait, func(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
		var re rawEvent
		if err := decodeWait(b, &re); err != nil {
			p.bad++
			return nil
		}
		out.Kind = trace.KindEvent
		toEvent(&re, 0, &out.Event)
		return emit(out)
	})
	return nil
}
