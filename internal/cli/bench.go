//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/lab"
	"github.com/perflab/perflab/venusd"
)

func init() {
	c := benchCommand()
	c.Run = runBench
	Register(c)
}

// maxBenchPoints bounds a sweep so that a typo in a list cannot start hours of measuring.
const maxBenchPoints = 500

func runBench(ctx context.Context, env *Env, args []string) error {
	c := commands["bench"]
	fs := NewFlagSet(env, c)
	transports := fs.String("transports", "tcp", "comma-separated `LIST` of transports: tcp, unix, shm")
	modes := fs.String("modes", "baseline", "comma-separated `LIST` of client modes: baseline, coalesce, pipeline, coalesce+pipeline")
	clients := fs.String("clients", "1,2,4,8,16", "comma-separated `LIST` of client counts")
	depth := fs.String("depth", "1", "comma-separated `LIST` of requests in flight per client (above 1: pipelined)")
	duration := fs.Duration("duration", lab.DefaultDuration, "measured time per point")
	loop := fs.String("loop", "batch", "server loop: batch (one event loop that runs every arrived request, then writes once per connection) or conn (a goroutine per client)")
	format := fs.String("format", "table", "output `FORMAT`: table, markdown or html (one self-contained page)")
	asJSON := fs.Bool("json", false, "print JSON (schema perflab.bench/v1) instead of tables")
	progress := fs.Bool("progress", false, "draw the progress bar even when stderr is not a terminal")
	out := fs.String("o", "", "keep one trace per point, and bench.json, in `DIR`")
	delay := fs.Duration("delay", 0, "emulated one-way link delay `D` in each client's transport (RTT grows by 2×D)")
	shmSpin := fs.Int("shm-spin", lab.DefaultShmSpin, "most polls of a shm ring before sleeping on a futex, in server and clients (0: venusd's adaptive default, about 50 µs, backing off where polling does not pay)")
	reqBytes := fs.Int("request-bytes", 64, "bytes of each request frame's payload")
	inProcess := fs.Bool("server-in-process", false, "run the server in perflab's process instead of its own (`perflab venus serve`): its threads are then shared with the clients' and the run queue is not split by side")
	withEvidence := fs.Bool("evidence", true, "record each socket point's processes with the kernel's scheduler evidence (eBPF, as record --evidence sched) and report each round trip's own wake-up and run-queue delay; without eBPF the sweep says so and gives schedstat's figures only")
	ext := externalFlags(fs)
	DurationRange(fs, "duration", time.Millisecond, 10*time.Minute)
	DurationRange(fs, "delay", 0, time.Second)
	IntRange(fs, "shm-spin", 0, 1<<24)
	Choice(fs, "format", "table", "markdown", "html")
	ByteRange(fs, "request-bytes", 20, 1<<20)
	Choice(fs, "loop", "batch", "conn")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return BadInput("unexpected argument %q", pos[0])
	}
	if ext.active() {
		if *format == "html" {
			return BadInput("--format html: the external sweep (--server-pid, --server-cmd) prints table or markdown")
		}
		return runBenchExternal(ctx, env, ext, *clients, *format, *asJSON, *progress, *out)
	}
	cfg := lab.Config{Loop: *loop, Duration: *duration, Dir: *out, Delay: *delay, ShmSpin: *shmSpin, RequestBytes: *reqBytes, Log: env.Stderr}
	if *duration <= 0 || *duration > 10*time.Minute {
		return BadInput("--duration %s: want more than 0 and at most 10m", *duration)
	}
	if *delay < 0 || *delay > time.Second {
		return BadInput("--delay %s: want 0 to 1s", *delay)
	}
	if *shmSpin < 0 || *shmSpin > 1<<24 {
		return BadInput("--shm-spin %d: want 0 to %d", *shmSpin, 1<<24)
	}
	if *format != "table" && *format != "markdown" && *format != "html" {
		return BadInput("--format %q: want table, markdown or html", *format)
	}
	if *reqBytes < 20 || *reqBytes > 1<<20 {
		return BadInput("--request-bytes %d: want 20 to 1MiB", *reqBytes)
	}
	if err := setBenchSweep(&cfg, *transports, *modes, *clients, *depth); err != nil {
		return err
	}
	if !*inProcess {
		exe, err := os.Executable()
		if err != nil {
			return Failed("find perflab's executable to start the server: %v (or run with --server-in-process)", err)
		}
		cfg.ServerCommand = []string{exe, "venus", "serve"}
	}
	if *withEvidence {
		if rec, note := benchEvidence(); rec != nil {
			cfg.Evidence = rec
		} else {
			cfg.EvidenceNote = note
		}
	}
	if *progress || isTerminal(env.Stderr) {
		cfg.Progress = benchProgressBar(env)
	}
	res, err := lab.Run(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return Failed("bench interrupted: %v", err)
		}
		return Failed("%v", err)
	}
	return writeBenchResult(env, res, cfg.Duration, *out, *format, *asJSON)
}

// setBenchSweep checks the sweep's lists (transports, modes, client counts, depths) and stores them
// in cfg, refusing sweeps of more than maxBenchPoints points.
func setBenchSweep(cfg *lab.Config, transports, modes, clients, depth string) error {
	var err error
	for _, t := range splitList(transports) {
		if t != "tcp" && t != "unix" && t != "shm" {
			return BadInput("--transports: %q is not tcp, unix or shm", t)
		}
		cfg.Transports = append(cfg.Transports, t)
	}
	for _, m := range splitList(modes) {
		md, err := venusd.ParseMode(m)
		if err != nil {
			return BadInput("--modes: %v", err)
		}
		cfg.Modes = append(cfg.Modes, md)
	}
	if cfg.Clients, err = intList("--clients", clients, 1, lab.MaxClients); err != nil {
		return err
	}
	if cfg.Depths, err = intList("--depth", depth, 1, 1024); err != nil {
		return err
	}
	if cfg.Loop != "batch" && cfg.Loop != "conn" {
		return BadInput("--loop %q: want batch or conn", cfg.Loop)
	}
	if len(cfg.Transports) == 0 || len(cfg.Modes) == 0 {
		return BadInput("--transports and --modes need at least one entry")
	}
	total := len(cfg.Transports) * len(cfg.Modes) * len(cfg.Clients) * len(cfg.Depths)
	if total > maxBenchPoints {
		return BadInput("%d points: at most %d per sweep", total, maxBenchPoints)
	}
	return nil
}

// benchProgressBar returns a lab progress callback that redraws a one-line bar on env's stderr.
func benchProgressBar(env *Env) func(done, total int, p *lab.Point) {
	start := time.Now()
	return func(done, total int, p *lab.Point) {
		const width = 30
		bar := strings.Repeat("#", done*width/total) + strings.Repeat(".", width-done*width/total)
		fmt.Fprintf(env.Stderr, "\rbench [%s] %d/%d %-28s %9.0f/s  %5.0fs", bar, done, total, p.Label(), p.ThroughputPerS, time.Since(start).Seconds())
		if done == total {
			fmt.Fprintln(env.Stderr)
		}
	}
}

// writeBenchJSON writes a sweep's result res as bench.json into dir (when set), and to stdout
// when asJSON, which is then all there is to print (done).
func writeBenchJSON(env *Env, res any, dir string, asJSON bool) (done bool, err error) {
	if dir != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "bench.json"), append(b, '\n'), 0o644)
		}
		if err != nil {
			return false, Failed("write bench.json: %v", err)
		}
	}
	if !asJSON {
		return false, nil
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetIndent("", "  ")
	return true, enc.Encode(res)
}

// writeBenchResult writes bench.json into dir (when set) and prints res as JSON or as tables in
// format; duration is the measured time per point.
func writeBenchResult(env *Env, res *lab.Result, duration time.Duration, dir, format string, asJSON bool) error {
	if done, err := writeBenchJSON(env, res, dir, asJSON); done || err != nil {
		return err
	}
	head := fmt.Sprintf("perflab bench: %d points, %s per point, %s loop, on %s (%d CPUs, Linux %s, %s)",
		len(res.Points), duration, res.Loop, res.Machine.Host, res.Machine.CPUs, res.Machine.Kernel, res.Machine.Go)
	if format == "html" {
		if err := lab.RenderHTML(env.Stdout, res, head); err != nil {
			return Failed("%v", err)
		}
		return nil
	}
	fmt.Fprintf(env.Stdout, "%s\n\n", head)
	if err := lab.Render(env.Stdout, res, format); err != nil {
		return Failed("%v", err)
	}
	if dir != "" {
		fmt.Fprintf(env.Stdout, "\ntraces and bench.json in %s\n", dir)
	}
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// intList parses a comma-separated list of integers in [lo, hi].
func intList(flag, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < lo || n > hi {
			return nil, BadInput("%s: %q is not a number from %d to %d", flag, f, lo, hi)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, BadInput("%s: empty list", flag)
	}
	return out, nil
}
