//go:build linux

package probes

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// CheckPrivileges reports whether this process may load and attach the probes: it needs
// CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, which implies both). It returns a
// *PrivilegeError naming what is missing, before anything is loaded or attached.
func CheckPrivileges() error {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	defer f.Close()
	eff, err := parseCapEff(f)
	if err != nil {
		return err
	}
	return missingCaps(eff)
}

// parseCapEff returns the effective capability set from /proc/PID/status.
func parseCapEff(f *os.File) (uint64, error) {
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("parse CapEff %q: %w", v, err)
			}
			return eff, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read capabilities: %w", err)
	}
	return 0, fmt.Errorf("read capabilities: no CapEff line in /proc/self/status")
}

// missingCaps returns a *PrivilegeError when the effective set eff cannot run the probes.
func missingCaps(eff uint64) error {
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || (has(capBPF) && has(capPerfmon)) {
		return nil
	}
	var miss []string
	if !has(capBPF) {
		miss = append(miss, "CAP_BPF")
	}
	if !has(capPerfmon) {
		miss = append(miss, "CAP_PERFMON")
	}
	return &PrivilegeError{Missing: miss}
}
