//go:build linux

package probes

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// libDirs are where the dynamic loader looks for libraries after the binary's own run paths and
// LD_LIBRARY_PATH (Debian's multiarch directories first).
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
	"/lib", "/usr/lib", "/usr/local/lib"}

// isLibSSL reports whether a file name is OpenSSL's libssl ("libssl.so.3"), not libssl3.so
// (NSS) or another library.
func isLibSSL(name string) bool {
	return strings.HasPrefix(filepath.Base(name), "libssl.so")
}

// MappedLibSSL returns the libssl files process pid maps, as paths through its root
// (/proc/PID/root/...), so that a process in another mount namespace is served too.
func MappedLibSSL(pid uint32) []string {
	return mappedMatching(pid, isLibSSL)
}

// mappedMatching returns the mapped files of pid whose path satisfies keep, each once.
func mappedMatching(pid uint32, keep func(string) bool) []string {
	p := strconv.FormatUint(uint64(pid), 10)
	f, err := os.Open("/proc/" + p + "/maps")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 6 || fields[5][0] != '/' {
			continue
		}
		path := string(fields[5])
		if seen[path] || !keep(path) {
			continue
		}
		seen[path] = true
		out = append(out, "/proc/"+p+"/root"+path)
	}
	return out
}

// ResolveCommand returns the path of a command as exec would run it, or "" when not found.
func ResolveCommand(name string) string {
	path, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	return abs
}

// NeededLibSSL returns the libssl files a binary loads at start, following its DT_NEEDED
// entries (and theirs) the way the dynamic loader searches: the run paths, LD_LIBRARY_PATH,
// then the system directories. A library opened later with dlopen is found in the process's
// maps while recording instead.
func NeededLibSSL(binary string) []string {
	var out []string
	seen := map[string]bool{}
	queue := []string{binary}
	for len(queue) > 0 && len(seen) < 512 {
		path := queue[0]
		queue = queue[1:]
		if seen[path] {
			continue
		}
		seen[path] = true
		if isLibSSL(path) {
			out = append(out, path)
		}
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		needed, _ := f.ImportedLibraries()
		var dirs []string
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			if v, err := f.DynString(tag); err == nil {
				for _, s := range v {
					for _, d := range strings.Split(s, ":") {
						dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(path)))
					}
				}
			}
		}
		f.Close()
		dirs = append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
		dirs = append(dirs, libDirs...)
		for _, lib := range needed {
			for _, d := range dirs {
				if d == "" {
					continue
				}
				p := filepath.Join(d, lib)
				if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
					queue = append(queue, p)
					break
				}
			}
		}
	}
	return out
}

// FindLibrary resolves a --uprobe path: a path that exists as given, a command on PATH, a
// library mapped by one of pids (by file name, "libzmq.so.5", or its start, "libzmq"), or a
// library in the system directories. It returns "" when none is found.
func FindLibrary(name string, pids []uint32) string {
	if strings.ContainsRune(name, '/') {
		if _, err := os.Stat(name); err == nil {
			return name
		}
		return ""
	}
	for _, pid := range pids {
		if m := mappedMatching(pid, func(p string) bool { return strings.HasPrefix(filepath.Base(p), name) }); len(m) > 0 {
			return m[0]
		}
	}
	for _, d := range libDirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
		if m, _ := filepath.Glob(p + ".so*"); len(m) > 0 {
			return m[0]
		}
	}
	return ResolveCommand(name)
}
