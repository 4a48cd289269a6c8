//go:build linux

package cli

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/trace"
)

// TestRecordWholeSystemLeavesItselfOut records with --whole-system -p 1 while perflab itself
// (this test process) and a child shell both move bytes over loopback: the shell's messages are
// in the trace, perflab's never.
func TestRecordWholeSystemLeavesItselfOut(t *testing.T) {
	requireRecord(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // perflab's own socket I/O: accept and read every connection
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	sh := exec.Command("bash", "-c", fmt.Sprintf(
		"sleep 0.5; for i in $(seq 40); do exec 3<>/dev/tcp/127.0.0.1/%d; echo hello >&3; exec 3>&-; sleep 0.05; done", port))
	if err := sh.Start(); err != nil {
		t.Skipf("bash: %v", err)
	}
	defer sh.Wait()
	out := filepath.Join(t.TempDir(), "whole.plt")
	code, _, stderr := runIn(t, "record", "--whole-system", "-p", "1", "--duration", "2500ms", "-o", out)
	if code != 0 {
		t.Fatalf("record --whole-system -p 1: exit %d: %s", code, stderr)
	}
	f, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	self, child := uint32(os.Getpid()), uint32(sh.Process.Pid)
	var mine, childs int
	for _, e := range f.Events {
		switch e.PID {
		case self:
			mine++
		case child:
			childs++
		}
	}
	if mine > 0 {
		t.Errorf("%d events of perflab itself (pid %d) in the trace", mine, self)
	}
	if childs == 0 {
		t.Errorf("no event of the child shell (pid %d) among %d events", child, len(f.Events))
	}
}
