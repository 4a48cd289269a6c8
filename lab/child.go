package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/perflab/perflab/venusd"
	"github.com/perflab/perflab/venusd/transport"
)

// ServerCounters is one line of `perflab venus serve --stats`: the server process's counters
// since it started. JSON field names are a contract between the two ends.
type ServerCounters struct {
	Loop *venusd.LoopStats      `json:"loop,omitempty"` // the batch loop's (nil with the conn loop)
	Shm  transport.ShmWaitStats `json:"shm"`            // the shm ring waits of the server's process
}

// childStartTimeout bounds how long a server process may take to say where it listens: a
// loaded machine can take seconds to start a Go program.
const childStartTimeout = 20 * time.Second

// childServer is a venusd server in a process of its own, started from Config.ServerCommand
// (`perflab venus serve`) with --stats: the kernel's count of its threads' waits for a CPU is
// then the server's alone, apart from the clients' in perflab's process.
type childServer struct {
	cmd  *exec.Cmd
	addr string
	in   io.WriteCloser
	out  *bufio.Scanner
	mu   sync.Mutex // one question and answer on the pipes at a time
	done chan error // the process's exit
}

// startChild starts command with the server's flags and waits until it says where it listens.
func startChild(ctx context.Context, command []string, listen, loop string, shmSpin, maxConns int, log io.Writer) (*childServer, error) {
	args := append(append([]string{}, command[1:]...), "--listen", listen, "--loop", loop,
		"--shm-spin", strconv.Itoa(shmSpin), "--max-conns", strconv.Itoa(maxConns), "--stats")
	cmd := exec.Command(command[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start server process: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start server process: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("start server process: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server process: %w", err)
	}
	c := &childServer{cmd: cmd, in: in, out: bufio.NewScanner(out), done: make(chan error, 1)}
	c.out.Buffer(make([]byte, 64<<10), 1<<20)
	addr := make(chan string, 1)
	go func() {
		// "venusd: listening on ADDR (stop with ...)"; every other line goes to the log.
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok && !sent {
				a, _, _ := strings.Cut(rest, " ")
				addr <- a
				sent = true
				continue
			}
			if !strings.HasPrefix(sc.Text(), "venusd: stopped:") {
				fmt.Fprintln(log, sc.Text())
			}
		}
		if !sent {
			close(addr)
		}
		c.done <- cmd.Wait()
	}()
	select {
	case a, ok := <-addr:
		if ok {
			c.addr = a
			return c, nil
		}
		err = errors.New("it exited before listening")
	case <-time.After(childStartTimeout):
		err = fmt.Errorf("it did not listen within %s", childStartTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	c.stop()
	return nil, fmt.Errorf("start server process %s: %w", command[0], err)
}

// Addr is where the server listens.
func (c *childServer) Addr() string { return c.addr }

// Pid is the server process's id.
func (c *childServer) Pid() int { return c.cmd.Process.Pid }

// counters asks the server process for its counters.
func (c *childServer) counters() (ServerCounters, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sc ServerCounters
	if _, err := io.WriteString(c.in, "\n"); err != nil {
		return sc, fmt.Errorf("ask server process for its counters: %w", err)
	}
	if !c.out.Scan() {
		err := c.out.Err()
		if err == nil {
			err = errors.New("the server process closed its output (it exited)")
		}
		return sc, fmt.Errorf("read server process's counters: %w", err)
	}
	if err := json.Unmarshal(c.out.Bytes(), &sc); err != nil {
		return sc, fmt.Errorf("decode server process's counters: %w", err)
	}
	return sc, nil
}

// stop ends the server process (the end of its stdin stops it; SIGKILL if it does not within
// 10 s) and returns how it exited.
func (c *childServer) stop() error {
	c.in.Close()
	select {
	case err := <-c.done:
		return err
	case <-time.After(10 * time.Second):
		c.cmd.Process.Kill()
		return fmt.Errorf("server process did not stop: %w", <-c.done)
	}
}
