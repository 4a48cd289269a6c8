// Package cli is the perflab command: a table of verbs, their flags, and the wiring between
// perflab's packages. It holds no analysis logic of its own.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
)

// Exit codes of every verb (docs/design.md, "The CLI contract").
const (
	ExitOK       = 0 // success
	ExitFailed   = 1 // the thing measured failed: a gate regression, a wrong checksum
	ExitBadInput = 2 // bad usage or bad input, with one line saying what and where
)

// Env is what a verb may touch of the outside world, so tests can run verbs in-process.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// Command is one verb of the perflab command.
type Command struct {
	Name    string // "record", "analyze", ...
	Summary string // one line for the verb list
	Usage   string // synopsis, after "perflab NAME "
	// Subcommands are the words that may follow Name and name the verb in messages ("venus
	// run"), so that bad input points at 'perflab venus run -h'.
	Subcommands []string
	// Run runs the verb. It returns nil on success, or an error made with Failed or BadInput (or
	// any other error, which counts as bad input).
	Run func(ctx context.Context, env *Env, args []string) error
	// LinuxOnly marks a verb that records or serves through Linux interfaces (eBPF, timerfd,
	// futex, memfd, SO_PEERCRED): built for another system, perflab says so in one line and
	// exits 2 instead of running it.
	LinuxOnly bool
}

var commands = map[string]*Command{}

// hostOS is the system perflab was built for (runtime.GOOS; tests set it to try the others).
var hostOS = runtime.GOOS

// Register adds a verb. Verbs register from init in their own file, once they work.
func Register(c *Command) {
	if _, dup := commands[c.Name]; dup {
		panic("cli: verb registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// ExitError carries an exit code with a one-line message.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Failed returns an error that exits 1: the thing measured failed.
func Failed(format string, a ...any) error {
	return &ExitError{Code: ExitFailed, Err: fmt.Errorf(format, a...)}
}

// BadInput returns an error that exits 2: bad usage or bad input.
func BadInput(format string, a ...any) error {
	return &ExitError{Code: ExitBadInput, Err: fmt.Errorf(format, a...)}
}

// errSilent exits with its code and prints nothing more (the verb has printed what it had to).
type errSilent struct{ code int }

func (e errSilent) Error() string { return fmt.Sprintf("exit %d", e.code) }

// Exit returns an error that exits with code and prints nothing.
func Exit(code int) error { return &ExitError{Code: code, Err: errSilent{code}} }

// Main runs perflab with args (without the program name) and returns the exit code. A panic in
// a verb is caught, reported in one line, and exits 2.
func Main(ctx context.Context, env *Env, args []string) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(env.Stderr, "perflab: internal error: %v\n", r)
			if os.Getenv("PERFLAB_DEBUG") != "" {
				env.Stderr.Write(debug.Stack())
			}
			code = ExitBadInput
		}
	}()
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if len(args) == 0 {
		fmt.Fprintln(env.Stderr, "perflab: no command given; run 'perflab help' for the list of commands")
		return ExitBadInput
	}
	if args[0] == "--version" || args[0] == "-version" {
		fmt.Fprintln(env.Stdout, versionLine())
		return ExitOK
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(env.Stdout)
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "perflab: unknown command %q; run 'perflab help' for the list of commands\n", args[0])
		return ExitBadInput
	}
	if c.LinuxOnly && hostOS != "linux" {
		fmt.Fprintf(env.Stderr, "perflab %s: needs Linux; this perflab runs on %s/%s, where analyze, compare, gate, model, merge and export work\n",
			c.Name, hostOS, runtime.GOARCH)
		return ExitBadInput
	}
	err := c.Run(ctx, env, args[1:])
	if err == nil {
		return ExitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	code = ExitBadInput
	var ee *ExitError
	if errors.As(err, &ee) {
		code = ee.Code
		if _, silent := ee.Err.(errSilent); silent {
			return code
		}
	}
	verb := verbName(c, args[1:])
	msg := strings.ReplaceAll(err.Error(), "\n", "; ")
	if code == ExitBadInput {
		// One line: what and where, then where the usage is (never the usage itself).
		msg += fmt.Sprintf("; run 'perflab %s -h' for usage", verb)
	}
	fmt.Fprintf(env.Stderr, "perflab %s: %s\n", verb, msg)
	return code
}

// verbName is the verb that args run: c's name, and its subcommand when args start with one.
func verbName(c *Command, args []string) string {
	if len(args) > 0 {
		for _, s := range c.Subcommands {
			if args[0] == s {
				return c.Name + " " + s
			}
		}
	}
	return c.Name
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "perflab: a performance lab for round-trip-bound systems")
	fmt.Fprintln(w, "\nusage: perflab COMMAND [flags] [args]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].Summary)
	}
	fmt.Fprintln(w, "\nRun 'perflab COMMAND -h' for a command's flags. Exit codes: 0 ok, 1 measured failure, 2 bad input.")
}

// NewFlagSet returns a flag set for verb c that reports errors as bad input and writes its
// usage to env.Stderr when asked with -h (never after an error: see ParseFlags).
func NewFlagSet(env *Env, c *Command) *flag.FlagSet {
	fs := flag.NewFlagSet("perflab "+c.Name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: perflab %s %s\n\n%s\n\nflags:\n", c.Name, c.Usage, c.Summary)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args with fs, turning a parse error into one line of bad input that names
// the flag and what it allows (see FlagError); -h prints the usage. Flags may come after
// positional arguments ("analyze trace.plt --format json"), except after "--".
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	defer func() { fs.SetOutput(out); fs.Usage = usage }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				if usage != nil {
					usage()
				} else {
					fs.PrintDefaults()
				}
				return nil, err
			}
			return nil, flagParseError(fs, err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
