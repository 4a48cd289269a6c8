package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/perflab/perflab/collectors"
	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/reports"
	"github.com/perflab/perflab/trace"
)

func init() {
	c := &Command{
		Name:      "record",
		Summary:   "capture every socket message of running processes or of a command, with eBPF",
		Usage:     "[-o FILE] [--duration D] [--payload-bytes N] [--label K=V]... [--progress] [--waits] [--tls] [--uprobe SPEC]... [--evidence PARTS] (-p PID[,PID...] | -- COMMAND [ARG...])",
		LinuxOnly: true,
	}
	c.Run = func(ctx context.Context, env *Env, args []string) error { return runRecord(ctx, env, c, args) }
	Register(c)
}

// labelFlag collects --label K=V.
type labelFlag map[string]string

func (l labelFlag) String() string { return "" }

func (l labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want K=V, got %q", s)
	}
	l[k] = v
	return nil
}

// recordArgs is a parsed record command line.
type recordArgs struct {
	out      string
	duration time.Duration
	payload  int
	ring     int
	evidence probes.Evidence // kernel evidence parts to record
	labels   map[string]string
	pids     []uint32
	command  []string
	progress bool
	waits    bool // the loop probe: wait calls of the recorded threads
	// untilCommand stops the recording when the command exits, though -p processes still
	// run (perflab bench --server: the client's run is the point).
	untilCommand bool
	live         *liveView // perflab top's view; nil for record
	// wholeSystem allows -p to name init or an ancestor of perflab, whose descendants are
	// (nearly) every process.
	wholeSystem bool
	tls         bool                // --tls: OpenSSL plaintext
	uprobes     []probes.UprobeSpec // --uprobe
}

// uprobeFlag collects --uprobe SPEC.
type uprobeFlag struct{ specs *[]probes.UprobeSpec }

func (u uprobeFlag) String() string { return "" }

func (u uprobeFlag) Set(s string) error {
	sp, err := probes.ParseUprobeSpec(s)
	if err != nil {
		if strings.HasPrefix(err.Error(), "want ") {
			return err
		}
		return fmt.Errorf("want %s (%v)", probes.UprobeSyntax, err)
	}
	if len(*u.specs) >= 64 {
		return errors.New("want at most 64 --uprobe specs")
	}
	*u.specs = append(*u.specs, sp)
	return nil
}

func parseRecord(env *Env, c *Command, args []string) (*recordArgs, error) {
	a := &recordArgs{labels: map[string]string{}}
	fs := NewFlagSet(env, c)
	fs.StringVar(&a.out, "o", "record.plt", "write the trace to `FILE`")
	fs.DurationVar(&a.duration, "duration", 0, "stop after `D` (default: when stopped or when the targets exit)")
	fs.IntVar(&a.payload, "payload-bytes", probes.DefaultPayloadBytes, "keep the first `N` bytes of each message's data, 0..256")
	fs.IntVar(&a.ring, "ring-bytes", probes.DefaultRingBytes, "ring buffer size in `bytes`, a power of two")
	evidence := fs.String("evidence", probes.EvidenceAll.String(), "kernel evidence to record next to the messages: `PARTS` of sched (run-queue and wake-up delay), tcp (retransmissions, srtt, cwnd, windows), conn (connect, accept, close), or none")
	fs.Var(labelFlag(a.labels), "label", "add a `K=V` label to the trace metadata (repeatable)")
	pids := fs.String("p", "", "record the processes `PID[,PID...]` (all their threads and the children they fork)")
	fs.BoolVar(&a.progress, "progress", false, "print live progress even when stderr is not a terminal")
	fs.BoolVar(&a.waits, "waits", false, "also record the wait calls of event loops (epoll_wait, poll, select, io_uring_enter, ...): "+
		"the cycles analyze's loop section needs; every process's system calls then take the kernel's slower path (docs/record.md)")
	fs.BoolVar(&a.tls, "tls", false, "also record TLS plaintext at OpenSSL's SSL_write/SSL_read (and _ex), on the connection that carries it")
	fs.Var(uprobeFlag{&a.uprobes}, "uprobe", "also record the calls of a user-space function as messages: `SPEC` is "+probes.UprobeSyntax+" (repeatable)")
	fs.BoolVar(&a.wholeSystem, "whole-system", false, "allow -p to name pid 1 or an ancestor of perflab, recording nearly every process (perflab itself is always left out)")

	ByteRange(fs, "payload-bytes", 0, trace.MaxPayload)
	ByteRange(fs, "ring-bytes", 4096, 1<<30)
	powerOfTwo(fs, "ring-bytes")
	DurationRange(fs, "duration", 0, 365*24*time.Hour)

	// Everything after "--" is the command, flags included.
	flagArgs := args
	for i, s := range args {
		if s == "--" {
			flagArgs, a.command = args[:i], args[i+1:]
			break
		}
	}
	FlagCheck(fs, "evidence", func(s string) error {
		_, err := probes.ParseEvidence(s)
		return err
	})
	pos, err := ParseFlags(fs, flagArgs)
	if err != nil {
		return nil, err
	}
	if a.evidence, err = probes.ParseEvidence(*evidence); err != nil {
		return nil, FlagError("evidence", *evidence, "parts of sched, tcp, conn, all or none")
	}
	if len(pos) > 0 {
		return nil, BadInput("unexpected argument %q: put the command after -- (usage: perflab record %s)", pos[0], c.Usage)
	}
	if *pids != "" {
		for _, s := range strings.Split(*pids, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
			if err != nil || n == 0 {
				return nil, FlagError("p", *pids, "process ids like 1234 or 1234,5678")
			}
			a.pids = append(a.pids, uint32(n))
		}
	}
	switch {
	case len(a.pids) == 0 && len(a.command) == 0:
		return nil, BadInput("nothing to record: give -p PID or -- COMMAND (usage: perflab record %s)", c.Usage)
	case len(a.pids) > 0 && len(a.command) > 0:
		return nil, BadInput("give either -p PID or -- COMMAND, not both")
	}
	if a.payload < 0 || a.payload > trace.MaxPayload {
		return nil, BadInput("--payload-bytes %d out of range 0..%d", a.payload, trace.MaxPayload)
	}
	if a.duration < 0 {
		return nil, BadInput("--duration %v is negative", a.duration)
	}
	return a, nil
}

// checkTargets refuses -p targets that would make perflab record itself: perflab's own pid
// always, and without wholeSystem pid 1 or any ancestor of perflab (whose descendants are the
// whole system, or at least the whole session, perflab included).
func checkTargets(pids []uint32, self uint32, wholeSystem bool) error {
	for _, pid := range pids {
		if pid == self {
			return FlagError("p", pid, "a process other than perflab itself")
		}
	}
	if wholeSystem {
		return nil
	}
	for _, pid := range pids {
		if pid == 1 {
			return FlagError("p", pid, "a process whose descendants are not the whole system (pid 1 is init); add --whole-system to record every process")
		}
	}
	for _, d := range probes.Descendants(pids) {
		if d == self {
			for _, pid := range pids {
				if isAncestor(pid, self) {
					return FlagError("p", pid, "a process that is not an ancestor of perflab (its descendants include perflab itself); add --whole-system to record them anyway")
				}
			}
			return FlagError("p", joinPIDs(pids), "no ancestor of perflab (their descendants include perflab itself); add --whole-system to record them anyway")
		}
	}
	return nil
}

// isAncestor reports whether pid is an ancestor of process p.
func isAncestor(pid, p uint32) bool {
	for _, d := range probes.Descendants([]uint32{pid}) {
		if d == p {
			return true
		}
	}
	return false
}

func joinPIDs(pids []uint32) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.FormatUint(uint64(p), 10)
	}
	return strings.Join(s, ",")
}

func runRecord(ctx context.Context, env *Env, c *Command, args []string) error {
	a, err := parseRecord(env, c, args)
	if err != nil {
		return err
	}
	return recordWith(ctx, env, a)
}

// recording is one run of perflab record (or top), put together step by step by recordWith.
type recording struct {
	env   *Env
	a     *recordArgs
	self  uint32         // perflab's own pid, never recorded
	cmd   *exec.Cmd      // the command to start; nil with -p
	probe *probes.Probe  // the loaded and attached probes
	file  io.WriteCloser // the trace file (a discarding one without -o)
	w     *trace.Writer  // the trace, once its header is written
}

// recordWith records as a says: to a.out (nowhere when it is ""), with a live view when
// a.live is set (perflab top). Every step that can fail on bad input does so before the
// probes are loaded or the command started.
func recordWith(ctx context.Context, env *Env, a *recordArgs) error {
	r := &recording{env: env, a: a, self: uint32(os.Getpid())}
	if err := r.checkTargets(); err != nil {
		return err
	}
	if err := r.prepareCommand(); err != nil {
		return err
	}
	if err := r.openProbes(); err != nil {
		return err
	}
	defer r.probe.Close()
	if err := r.addTargets(); err != nil {
		return err
	}
	if err := r.createFile(); err != nil {
		return err
	}
	defer r.file.Close()
	if err := r.startCommand(); err != nil {
		return err
	}
	if err := r.startTrace(); err != nil {
		return err
	}
	res, targetsGone, recErr := r.run(ctx)
	status := r.reapCommand(!targetsGone)
	r.notes(res, targetsGone)
	if err := r.closeTrace(recErr); err != nil {
		return err
	}
	if err := r.summary(res); err != nil {
		return err
	}
	if status != 0 {
		return Exit(status)
	}
	return nil
}

// checkTargets refuses -p pids that do not exist or that would make perflab record itself.
func (r *recording) checkTargets() error {
	for _, pid := range r.a.pids {
		if !processExists(pid) {
			return BadInput("-p: no process %d", pid)
		}
	}
	return checkTargets(r.a.pids, r.self, r.a.wholeSystem)
}

// prepareCommand finds the command to record, without starting it.
func (r *recording) prepareCommand() error {
	a := r.a
	if len(a.command) == 0 {
		return nil
	}
	path, err := exec.LookPath(a.command[0])
	if err != nil {
		return BadInput("cannot start %q: %v", a.command[0], err)
	}
	cmd := exec.Command(path, a.command[1:]...)
	cmd.Args[0] = a.command[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r.env.Stdin, r.env.Stdout, r.env.Stderr
	if a.live != nil && a.live.tty {
		// perflab top owns the terminal: its keys and its screen.
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, nil
	}
	r.cmd = cmd
	return nil
}

// openProbes checks privileges before anything is loaded, attached or created, then loads and
// attaches the probes.
func (r *recording) openProbes() error {
	if err := probes.CheckPrivileges(); err != nil {
		return BadInput("%v", err)
	}
	probe, err := probes.Open(probes.Config{PayloadBytes: r.a.payload, RingBytes: r.a.ring, Waits: r.a.waits,
		TLS: r.a.tls, Uprobes: r.a.uprobes, Note: r.note, Evidence: r.a.evidence})
	if err != nil {
		var pe *probes.PrivilegeError
		if errors.As(err, &pe) || errors.Is(err, probes.ErrUnsupported) {
			return BadInput("%v", err)
		}
		return fmt.Errorf("open probes: %w", err)
	}
	r.probe = probe
	// Loading parsed the kernel's BTF: collect that garbage now rather than while recording.
	runtime.GC()
	return nil
}

// addTargets makes the -p processes and their existing children targets; the children they
// fork from now on are followed by the probes.
func (r *recording) addTargets() error {
	for _, pid := range r.a.pids {
		if err := r.probe.AddPID(pid); err != nil {
			return err
		}
		if !processExists(pid) {
			return BadInput("-p: process %d exited", pid)
		}
	}
	for _, pid := range probes.Descendants(r.a.pids) {
		if pid == r.self {
			continue // perflab never records itself (--whole-system)
		}
		if err := r.probe.AddPID(pid); err != nil {
			return err
		}
		if !processExists(pid) { // gone before the probes could see it exit
			if err := r.probe.RemovePID(pid); err != nil {
				return err
			}
		}
	}
	// The uprobes go on the files the targets map, or the command will load, before it starts.
	cmdPath := ""
	if r.cmd != nil {
		cmdPath = r.cmd.Path
	}
	if err := r.probe.StartUprobes(append(r.a.pids, probes.Descendants(r.a.pids)...), cmdPath); err != nil {
		return fmt.Errorf("attach uprobes: %w", err)
	}
	return nil
}

// note prints a line about the recording that does not stop it (a uprobe left out).
func (r *recording) note(s string) {
	fmt.Fprintf(r.env.Stderr, "perflab record: note: %s\n", s)
}

// createFile creates the trace file before the command starts, so that a bad -o starts
// nothing; the header is written once the command's pid is known (its events wait in the
// ring).
func (r *recording) createFile() error {
	r.file = nopCloser{io.Discard}
	if r.a.out == "" {
		return nil
	}
	f, err := os.Create(r.a.out)
	if err != nil {
		return BadInput("-o: %v", err)
	}
	r.file = f
	return nil
}

// startCommand starts the command while perflab's children are followed, so the probes see it
// from its first instruction; the probes trace the new process, never perflab.
func (r *recording) startCommand() error {
	if r.cmd == nil {
		return nil
	}
	stop, err := r.probe.FollowChildren(r.self)
	if err != nil {
		return err
	}
	err = r.cmd.Start()
	if serr := stop(); serr != nil && err == nil {
		err = serr
	}
	if err != nil {
		return BadInput("cannot start %q: %v", r.a.command[0], err)
	}
	if err := r.probe.AddPID(uint32(r.cmd.Process.Pid)); err != nil {
		r.killCommand()
		return err
	}
	return nil
}

// killCommand ends a command perflab started, after a failure.
func (r *recording) killCommand() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// meta is the trace metadata of this recording.
func (r *recording) meta() trace.Meta {
	a := r.a
	m := trace.Meta{
		Version:      BuildVersion(),
		Kernel:       trace.KernelRelease(),
		Command:      a.command,
		PIDs:         a.pids,
		Probes:       r.probe.Probes(),
		Source:       trace.SourceEBPF.String(),
		PayloadBytes: a.payload,
		Labels:       a.labels,
	}
	m.Host, _ = os.Hostname()
	if len(a.labels) == 0 {
		m.Labels = nil
	}
	if r.cmd != nil {
		m.PIDs = []uint32{uint32(r.cmd.Process.Pid)}
	}
	return m
}

// startTrace writes the trace header.
func (r *recording) startTrace() error {
	w, err := collectors.NewTrace(r.file, r.meta(), nil)
	if err != nil {
		r.killCommand()
		return fmt.Errorf("-o %s: %w", r.a.out, err)
	}
	r.w = w
	return nil
}

// run drains the probes into the trace until the context is done, --duration has passed, the
// live view quits, or every recorded process has exited (targetsGone).
func (r *recording) run(ctx context.Context) (res *collectors.Result, targetsGone bool, err error) {
	a := r.a
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.duration > 0 {
		rctx, cancel = context.WithTimeout(rctx, a.duration)
		defer cancel()
	}
	// Once stopping has begun, a second SIGINT or SIGTERM ends perflab at once, with the trace
	// readable up to its last complete chunk.
	go func() {
		<-rctx.Done()
		if ctx.Err() != nil {
			signal.Reset(os.Interrupt, syscall.SIGTERM)
		}
	}()
	opt := collectors.Options{}
	liveDone := make(chan struct{})
	if a.live != nil {
		// perflab top: every record also feeds the live view, which stops the recording on q.
		opt.Tap = a.live.add
		go func() {
			defer close(liveDone)
			a.live.run(rctx, cancel)
		}()
	} else {
		close(liveDone)
		if a.progress || isTerminal(r.env.Stderr) {
			opt.Progress = r.env.Stderr
		}
	}
	if a.untilCommand && r.cmd != nil && r.cmd.Process != nil {
		go r.stopWithCommand(rctx, cancel)
	}
	res, err = collectors.Record(rctx, r.probe, r.w, opt)
	targetsGone = err == nil && rctx.Err() == nil
	cancel()
	<-liveDone
	return res, targetsGone, err
}

// stopWithCommand cancels the recording once the command perflab started has exited (it
// stays a zombie until reapCommand, so it is looked for among the live targets).
func (r *recording) stopWithCommand(ctx context.Context, cancel func()) {
	pid := uint32(r.cmd.Process.Pid)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		live, err := r.probe.Targets()
		if err != nil {
			continue
		}
		if !slices.Contains(live, pid) {
			cancel()
			return
		}
	}
}

// reapCommand waits for the command perflab started (asking it to stop first when it is
// still expected to run) and returns its exit status as a shell gives it, 0 with -p.
func (r *recording) reapCommand(stop bool) int {
	if r.cmd == nil {
		return 0
	}
	werr := waitCommand(r.cmd, stop)
	status := commandStatus(r.cmd.ProcessState, stop)
	switch {
	case r.cmd.ProcessState == nil:
		fmt.Fprintf(r.env.Stderr, "perflab record: note: %s: %v\n", r.a.command[0], werr)
	case status != 0:
		fmt.Fprintf(r.env.Stderr, "perflab record: note: %s %s\n", r.a.command[0], describeExit(r.cmd.ProcessState))
	}
	return status
}

// notes says why the recording stopped and what it lost.
func (r *recording) notes(res *collectors.Result, targetsGone bool) {
	if targetsGone {
		fmt.Fprintln(r.env.Stderr, "perflab record: note: the recorded processes exited; recording stopped")
	}
	if n := res.LostTotal(); n > 0 {
		fmt.Fprintf(r.env.Stderr, "perflab record: warning: %d events lost (the ring buffer was full); a larger --ring-bytes keeps more\n", n)
	}
}

// closeTrace writes the footer and closes the file, then detaches the probes.
func (r *recording) closeTrace(recErr error) error {
	cerr := r.w.Close()
	if err := r.file.Close(); err != nil && cerr == nil {
		cerr = err
	}
	if recErr != nil {
		return Failed("%v (trace %s is readable up to the failure)", recErr, r.a.out)
	}
	if cerr != nil {
		return Failed("close trace %s: %v", r.a.out, cerr)
	}
	if err := r.probe.Close(); err != nil {
		fmt.Fprintf(r.env.Stderr, "perflab record: note: detach probes: %v\n", err)
	}
	return nil
}

// summary prints what was recorded. Like perf record and strace, everything perflab says goes
// to stderr: the recorded command's stdout stays its own (record -- prog --json > out.json).
func (r *recording) summary(res *collectors.Result) error {
	if r.a.live == nil {
		if err := reports.Record(r.env.Stderr, res, 10); err != nil {
			return err
		}
		fmt.Fprintln(r.env.Stderr)
	}
	if r.a.out != "" {
		fmt.Fprintf(r.env.Stderr, "trace written to %s\n", r.a.out)
	}
	return nil
}

// commandStatus is the exit status of a command perflab started, as a shell reports it: its
// exit code, or 128+N when signal N ended it. A command perflab stopped itself (stopped: at
// --duration, or on SIGINT/SIGTERM to perflab) and that died of that SIGTERM or of the SIGKILL
// after it counts as 0: the stop was asked for.
func commandStatus(ps *os.ProcessState, stopped bool) int {
	if ps == nil {
		return ExitFailed
	}
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok {
		return ps.ExitCode()
	}
	if ws.Signaled() {
		if stopped && (ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL) {
			return 0
		}
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// describeExit says how a command ended: "exited with status 3", "was killed by signal 9
// (killed)".
func describeExit(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", ps.ExitCode())
}

// nopCloser is a WriteCloser whose Close does nothing.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// waitCommand reaps a command perflab started. With stop it first asks the command to stop
// (SIGTERM) and kills it after 2 s.
func waitCommand(cmd *exec.Cmd, stop bool) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !stop {
		return <-done
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		cmd.Process.Kill()
		return <-done
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
