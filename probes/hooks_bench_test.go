//go:build linux && amd64

package probes

import (
	"errors"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
)

// BenchmarkHookChoice is how the probes' hooks were chosen: it measures what a process that is
// not recorded pays when an empty program (return 0) sits on each candidate hook, with
// dd if=/dev/zero of=/dev/null bs=1 count=1000000 (two million read/write system calls, no
// socket), alternating runs without and with the hook (9 rounds, medians of dd's CPU time,
// recorded over plain):
//
//   - raw_syscalls: tp_btf on sys_enter and sys_exit, what the probes used first;
//   - syscalls_sendto: the per-system-call tracepoints syscalls:sys_enter_sendto and
//     sys_exit_sendto, which dd never calls (needs tracefs mounted);
//   - fentry_sendto: fentry/fexit on __x64_sys_sendto (reported as not loadable where the
//     kernel refuses trampolines);
//   - sock: tp_btf on sock:sock_send_length and sock_recv_length, what the probes use.
//
// Run it with: go test -run '^$' -bench HookChoice -benchtime 1x ./probes
func BenchmarkHookChoice(b *testing.B) {
	if err := CheckPrivileges(); err != nil {
		b.Skip(err)
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		b.Fatal(err)
	}
	empty := func(typ ebpf.ProgramType, at ebpf.AttachType, to string) (*ebpf.Program, error) {
		return ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, AttachType: at, AttachTo: to, License: "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	}
	tracing := func(at ebpf.AttachType, targets ...string) func() ([]link.Link, error) {
		return func() ([]link.Link, error) {
			var ls []link.Link
			for _, to := range targets {
				pr, err := empty(ebpf.Tracing, at, to)
				if err != nil {
					return ls, err
				}
				l, err := link.AttachTracing(link.TracingOptions{Program: pr, AttachType: at})
				pr.Close()
				if err != nil {
					return ls, err
				}
				ls = append(ls, l)
			}
			return ls, nil
		}
	}
	hooks := []struct {
		name   string
		attach func() ([]link.Link, error)
	}{
		{"raw_syscalls", tracing(ebpf.AttachTraceRawTp, "sys_enter", "sys_exit")},
		{"syscalls_sendto", func() ([]link.Link, error) {
			var ls []link.Link
			for _, tp := range []string{"sys_enter_sendto", "sys_exit_sendto"} {
				pr, err := empty(ebpf.TracePoint, 0, "")
				if err != nil {
					return ls, err
				}
				l, err := link.Tracepoint("syscalls", tp, pr, nil)
				pr.Close()
				if err != nil {
					return ls, err
				}
				ls = append(ls, l)
			}
			return ls, nil
		}},
		{"fentry_sendto", func() ([]link.Link, error) {
			ls, err := tracing(ebpf.AttachTraceFEntry, "__x64_sys_sendto")()
			if err != nil {
				return ls, err
			}
			more, err := tracing(ebpf.AttachTraceFExit, "__x64_sys_sendto")()
			return append(ls, more...), err
		}},
		{"sock", tracing(ebpf.AttachTraceRawTp, "sock_send_length", "sock_recv_length")},
	}
	dd := func() time.Duration {
		cmd := exec.Command("dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=1000000")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("dd: %v: %s", err, out)
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	const rounds = 9
	for _, h := range hooks {
		b.Run(h.name, func(b *testing.B) {
			ls, err := h.attach()
			for _, l := range ls {
				l.Close()
			}
			if err != nil {
				if errors.Is(err, ebpf.ErrNotSupported) {
					b.Skipf("%s: not supported here: %v", h.name, err)
				}
				b.Skipf("%s cannot be attached here: %v", h.name, err)
			}
			for i := 0; i < b.N; i++ {
				var ratios, plain []float64
				for r := 0; r < rounds; r++ {
					c0 := dd()
					ls, err := h.attach()
					if err != nil {
						b.Fatal(err)
					}
					c1 := dd()
					for _, l := range ls {
						l.Close()
					}
					ratios = append(ratios, float64(c1)/float64(c0))
					plain = append(plain, c0.Seconds())
				}
				sort.Float64s(ratios)
				sort.Float64s(plain)
				b.ReportMetric(ratios[len(ratios)/2], "dd_cpu_ratio")
				b.ReportMetric(plain[len(plain)/2]/2e6*1e9, "plain_ns/syscall")
			}
		})
	}
}
