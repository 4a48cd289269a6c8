//go:build linux

package probes

import (
	"bytes"
	"os"
	"strconv"
)

// Descendants returns the live descendants of the processes roots (children, their children,
// ...), read from /proc, so that a recording by pid also covers the children that existed
// before it started. Processes that vanish while /proc is read are skipped.
func Descendants(roots []uint32) []uint32 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[uint32][]uint32{}
	for _, e := range ents {
		pid, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if ppid, ok := parentOf(b); ok {
			children[ppid] = append(children[ppid], uint32(pid))
		}
	}
	var out []uint32
	seen := map[uint32]bool{}
	queue := append([]uint32(nil), roots...)
	for _, r := range roots {
		seen[r] = true
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// parentOf returns the parent pid from a /proc/PID/stat line: "pid (comm) state ppid ...";
// comm may hold spaces and parentheses, so the fields after the last ')' are used.
func parentOf(stat []byte) (uint32, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.ParseUint(string(f[1]), 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(ppid), true
}

// running reports whether process pid exists and has not exited (a zombie, state Z or X, has
// exited: only its parent's wait is pending).
func running(pid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	if err != nil {
		return false
	}
	return runningState(b)
}

// runningState reads the state field of a /proc/PID/stat line.
func runningState(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 1 {
		return false
	}
	return f[0][0] != 'Z' && f[0][0] != 'X'
}
