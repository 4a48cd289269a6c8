//go:build linux

package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/perflab/perflab/lab"
	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/protocol"
)

// benchExternal holds the flags of `perflab bench --server-pid/--server-cmd --client`: a sweep
// of a server perflab did not write, driven by the user's closed-loop client.
type benchExternal struct {
	serverPID, serverCmd, client, clientFormat, clientTest, protocol *string
	serverWait                                                       *time.Duration
}

func externalFlags(fs *flag.FlagSet) *benchExternal {
	e := &benchExternal{
		serverPID:  fs.String("server-pid", "", "sweep the running server `PID[,PID...]` (recorded with its wait calls at every point) instead of a venusd"),
		serverCmd:  fs.String("server-cmd", "", "start the server `CMD` (split on spaces, no shell), sweep it, and stop it at the end"),
		serverWait: fs.Duration("server-wait", 500*time.Millisecond, "with --server-cmd, how long to let the server start before the first point"),
		client: fs.String("client", "", "closed-loop client `CMD` (run by sh -c) with {clients} where the client count goes, "+
			"e.g. 'redis-benchmark -p 6379 -c {clients} -n 20000 -t get --csv'"),
		clientFormat: fs.String("client-format", "auto", "how to read the client's summary: auto, redis-benchmark (--csv), memtier, json (docs/lab.md)"),
		clientTest:   fs.String("client-test", "", "the test `NAME` to take from a client summary of several (redis-benchmark -t get,set)"),
		protocol:     fs.String("protocol", "auto", "the protocol the server speaks, as analyze's --protocol"),
	}
	Choice(fs, "client-format", "auto", "redis-benchmark", "memtier", "json")
	Choice(fs, "protocol", protocolNames...)
	DurationRange(fs, "server-wait", 0, time.Minute)
	return e
}

func (e *benchExternal) active() bool {
	return *e.serverPID != "" || *e.serverCmd != "" || *e.client != ""
}

func runBenchExternal(ctx context.Context, env *Env, e *benchExternal, clientList, format string, asJSON, progress bool, out string) error {
	if err := checkBenchExternal(e); err != nil {
		return err
	}
	clients, err := intList("--clients", clientList, 1, lab.MaxClients)
	if err != nil {
		return err
	}
	if len(clients) > maxBenchPoints {
		return BadInput("%d points: at most %d per sweep", len(clients), maxBenchPoints)
	}
	if err := probes.CheckPrivileges(); err != nil {
		return BadInput("%v", err)
	}
	cfg := lab.ExternalConfig{Client: *e.client, ClientFormat: *e.clientFormat, ClientTest: *e.clientTest, Clients: clients,
		Dir: out, Protocol: *e.protocol, Record: benchRecorder(env)}
	if *e.serverPID != "" {
		if cfg.Server, err = parseServerPIDs(*e.serverPID); err != nil {
			return err
		}
		cfg.ServerLabel = "pid " + *e.serverPID
	} else {
		pid, stop, err := startBenchServer(ctx, env, *e.serverCmd, *e.serverWait)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Server = []uint32{pid}
		cfg.ServerLabel = filepath.Base(strings.Fields(*e.serverCmd)[0])
	}
	if progress || isTerminal(env.Stderr) {
		start := time.Now()
		cfg.Progress = func(done, total int, p *lab.ExternalPoint) {
			fmt.Fprintf(env.Stderr, "\rbench %s: %d/%d points, c%d %9.0f/s  %5.0fs", cfg.ServerLabel, done, total, p.Clients, p.ThroughputPerS, time.Since(start).Seconds())
			if done == total {
				fmt.Fprintln(env.Stderr)
			}
		}
	}
	res, err := lab.RunExternal(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return Failed("bench interrupted: %v", err)
		}
		return Failed("%v", err)
	}
	return writeBenchExternalResult(env, res, out, format, asJSON)
}

// checkBenchExternal checks that the external-server flags name a client command with the clients
// placeholder and exactly one way to find the server, and that --protocol is known.
func checkBenchExternal(e *benchExternal) error {
	switch {
	case *e.client == "":
		return BadInput("--server-pid and --server-cmd need --client 'CMD ... {clients} ...'")
	case *e.serverPID == "" && *e.serverCmd == "":
		return BadInput("--client needs the server: --server-pid PID or --server-cmd CMD")
	case *e.serverPID != "" && *e.serverCmd != "":
		return BadInput("give either --server-pid or --server-cmd, not both")
	case !strings.Contains(*e.client, lab.ClientsPlaceholder):
		return FlagError("client", *e.client, "a command with "+lab.ClientsPlaceholder+" where the client count goes")
	}
	if *e.protocol != "auto" {
		if _, err := protocol.BuiltinSpec(*e.protocol); err != nil {
			return BadInput("--protocol: %v", err)
		}
	}
	return nil
}

// parseServerPIDs parses --server-pid's comma-separated process ids, each of a running process.
func parseServerPIDs(list string) ([]uint32, error) {
	var pids []uint32
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
		if err != nil || n == 0 {
			return nil, FlagError("server-pid", list, "process ids like 1234 or 1234,5678")
		}
		if !processExists(uint32(n)) {
			return nil, BadInput("--server-pid: no process %d", n)
		}
		pids = append(pids, uint32(n))
	}
	return pids, nil
}

// startBenchServer starts the --server-cmd command line, waits wait for it to get ready and returns
// its process id and a stop function (SIGTERM, then SIGKILL after 5 s) for the caller to defer; on
// an error it has already stopped the server.
func startBenchServer(ctx context.Context, env *Env, cmdline string, wait time.Duration) (uint32, func(), error) {
	argv := strings.Fields(cmdline)
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return 0, nil, BadInput("--server-cmd: cannot start %q: %v", argv[0], err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Stdout, cmd.Stderr = env.Stderr, env.Stderr
	if err := cmd.Start(); err != nil {
		return 0, nil, BadInput("--server-cmd: %v", err)
	}
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		stop()
		return 0, nil, Failed("bench interrupted")
	}
	if !processExists(uint32(cmd.Process.Pid)) {
		stop()
		return 0, nil, Failed("--server-cmd: %s exited at start", argv[0])
	}
	return uint32(cmd.Process.Pid), stop, nil
}

// writeBenchExternalResult writes bench.json into dir (when set) and prints res as JSON or as
// tables in format.
func writeBenchExternalResult(env *Env, res *lab.ExternalResult, dir, format string, asJSON bool) error {
	if done, err := writeBenchJSON(env, res, dir, asJSON); done || err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "perflab bench: %d points of %s, client %q\n\n", len(res.Points), res.Server, res.Client)
	if err := lab.RenderExternal(env.Stdout, res, format); err != nil {
		return Failed("%v", err)
	}
	if dir != "" {
		fmt.Fprintf(env.Stdout, "\ntraces and bench.json in %s\n", dir)
	}
	return nil
}

// benchPayloadBytes is the data each event of a point keeps: the most, so that a client's
// pipelined requests in one call (redis-benchmark's two CONFIG GETs at connect) are each
// decoded and counted; small requests cost no more for it (only the bytes moved are copied).
const benchPayloadBytes = 256

// benchRecorder records a point as `perflab record --waits -p SERVER -- CLIENT` would, until
// the client exits, and returns what the client printed on stdout.
func benchRecorder(env *Env) lab.Recorder {
	return func(ctx context.Context, server []uint32, client []string, path string) ([]byte, error) {
		var stdout, stderr bytes.Buffer
		a := &recordArgs{out: path, pids: server, command: client, payload: benchPayloadBytes, ring: probes.DefaultRingBytes,
			waits: true, untilCommand: true, labels: map[string]string{"bench": "external"}}
		renv := &Env{Stdout: &stdout, Stderr: &stderr, Getenv: env.Getenv}
		if err := recordWith(ctx, renv, a); err != nil {
			msg := strings.TrimSpace(stderr.String())
			if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
				msg = msg[i+1:]
			}
			return nil, fmt.Errorf("record the point: %v (%s)", err, msg)
		}
		for _, l := range strings.Split(stderr.String(), "\n") {
			if strings.Contains(l, "warning:") {
				fmt.Fprintln(env.Stderr, l)
			}
		}
		return stdout.Bytes(), nil
	}
}
