//go:build linux

package probes

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestMissingCaps(t *testing.T) {
	tests := []struct {
		name string
		eff  uint64
		want []string
	}{
		{"root", 0x000001ffffffffff, nil},
		{"sys_admin", 1 << capSysAdmin, nil},
		{"bpf+perfmon", 1<<capBPF | 1<<capPerfmon, nil},
		{"none", 0, []string{"CAP_BPF", "CAP_PERFMON"}},
		{"only bpf", 1 << capBPF, []string{"CAP_PERFMON"}},
		{"only perfmon", 1 << capPerfmon, []string{"CAP_BPF"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := missingCaps(tc.eff)
			var pe *PrivilegeError
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected %v", err)
				}
				return
			}
			if !errors.As(err, &pe) || strings.Join(pe.Missing, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("got %v, want missing %v", err, tc.want)
			}
			msg := err.Error()
			for _, w := range []string{"setcap", "sudo", "venus run --trace"} {
				if !strings.Contains(msg, w) || strings.Contains(msg, "\n") {
					t.Errorf("message %q lacks %q or is not one line", msg, w)
				}
			}
		})
	}
}

func TestParseCapEff(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "status")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("Name:\tperflab\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n")
	f.Seek(0, 0)
	eff, err := parseCapEff(f)
	if err != nil || eff != 0x1ffffffffff {
		t.Fatalf("got %x, %v", eff, err)
	}
	f.Truncate(0)
	f.Seek(0, 0)
	f.WriteString("Name:\tx\n")
	f.Seek(0, 0)
	if _, err := parseCapEff(f); err == nil {
		t.Fatal("no CapEff line accepted")
	}
}
