package venusd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary run as a server process for the benchmarks (servePeer).
const helperEnv = "PERFLAB_VENUSD_TEST_PEER"

// peerProfileEnv names a file for the server process's CPU profile (go tool pprof), written
// when the benchmark ends; -cpuprofile profiles the client's side.
const peerProfileEnv = "PERFLAB_PEER_CPUPROFILE"

func TestMain(m *testing.M) {
	if dir := os.Getenv(helperEnv); dir != "" {
		os.Exit(servePeer(dir))
	}
	if total := os.Getenv(budgetServerEnv); total != "" {
		os.Exit(serveBudget(total))
	}
	goleak.VerifyTestMain(m)
}

// servePeer runs venusd servers on tcp, unix and shm and a bare TCP echo server, prints their
// addresses, one per line, and serves until its standard input closes.
func servePeer(dir string) int {
	if prof := os.Getenv(peerProfileEnv); prof != "" {
		f, err := os.Create(prof)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var addrs []string
	for _, listen := range []string{"tcp://127.0.0.1:0", "unix://" + filepath.Join(dir, "peer.sock"),
		fmt.Sprintf("shm:///perflab-peer-%d", os.Getpid())} {
		s, err := NewServer(ServerConfig{Listen: listen, Getenv: noEnv})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go s.Serve(ctx)
		addrs = append(addrs, s.Addr())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var sz [2]byte // request and reply sizes, once
				if _, err := io.ReadFull(c, sz[:]); err != nil {
					return
				}
				req, rep := make([]byte, int(sz[0])), make([]byte, int(sz[1]))
				for {
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					if _, err := c.Write(rep); err != nil {
						return
					}
				}
			}()
		}
	}()
	addrs = append(addrs, "bare://"+ln.Addr().String())
	fmt.Println(strings.Join(addrs, " "))
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// peer is a server process started by startPeer.
type peer struct {
	tcp, unix, shm, bare string
	pid                  int // the server process
}

// startPeer runs this test binary as a server process (servePeer) until the benchmark ends, so
// that client and server are separate processes, as in real use.
func startPeer(tb testing.TB) *peer {
	tb.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"="+tb.TempDir())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		tb.Fatalf("peer: %v", err)
	}
	f := strings.Fields(line)
	if len(f) != 4 {
		tb.Fatalf("peer printed %q", line)
	}
	return &peer{tcp: f[0], unix: f[1], shm: f[2], bare: strings.TrimPrefix(f[3], "bare://"), pid: cmd.Process.Pid}
}
