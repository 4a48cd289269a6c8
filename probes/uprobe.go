package probes

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/perflab/perflab/trace"
)

// UprobeSpec names a function of a binary or library whose calls are messages: which argument
// holds the buffer, where the length is, and which way the message goes. perflab record
// attaches to it with a uprobe (record --uprobe SPEC).
type UprobeSpec struct {
	Path   string    // the binary or library: a path, or a name looked up like a command or library
	Symbol string    // the function's symbol, as the ELF symbol table spells it
	Dir    trace.Dir // DirSend or DirRecv
	BufArg int       // argument holding the buffer, from 1
	LenArg int       // argument holding the length, from 1; 0 when it is the return value
	LenRet int       // the return value's width in bits when it is the length: 32 (int) or 64 (ssize_t)
	KeyArg int       // argument naming the connection (a socket handle), from 1; 0 for none
	// Go: the arguments follow Go's register ABI (ax, bx, cx, di, si, r8..r11; a slice takes
	// three: pointer, length, capacity). The record is made at entry, without a return probe:
	// a uretprobe rewrites the return address on the goroutine's stack, which the Go runtime
	// moves and checks, so the length must be an argument.
	Go   bool
	Text string // the spec as given
}

// UprobeSyntax is the form of a spec, for usage messages.
const UprobeSyntax = "PATH:SYMBOL,send|recv,buf=argN,len=argM|ret|ret64[,conn=argK][,go]"

// maxArg is the highest argument a spec can name: six registers in the C ABI, nine in Go's.
func maxArg(goABI bool) int {
	if goABI {
		return 9
	}
	return 6
}

// ParseUprobeSpec parses PATH:SYMBOL,send|recv,buf=argN,len=argM|ret|ret64[,conn=argK][,go].
// len=ret is an int return value, ret64 a 64-bit one (ssize_t). For a receive with len=argM
// the buffer is read when the function returns (at entry for Go functions, whose buffer must
// hold the message when the function is called).
func ParseUprobeSpec(s string) (UprobeSpec, error) {
	u := UprobeSpec{Text: s}
	parts := strings.Split(s, ",")
	loc := parts[0]
	i := strings.LastIndexByte(loc, ':')
	if i <= 0 || i == len(loc)-1 {
		return u, fmt.Errorf("want %s", UprobeSyntax)
	}
	u.Path, u.Symbol = loc[:i], loc[i+1:]
	lenSet := false
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		var err error
		switch k {
		case "send":
			u.Dir = trace.DirSend
		case "recv":
			u.Dir = trace.DirRecv
		case "go":
			u.Go = true
		case "buf":
			u.BufArg, err = argNum(v)
		case "conn":
			u.KeyArg, err = argNum(v)
		case "len":
			lenSet = true
			switch v {
			case "ret":
				u.LenRet = 32
			case "ret64":
				u.LenRet = 64
			default:
				u.LenArg, err = argNum(v)
			}
		default:
			return u, fmt.Errorf("unknown part %q", p)
		}
		if err != nil {
			return u, fmt.Errorf("%s: %w", p, err)
		}
	}
	switch {
	case u.Dir == trace.DirNone:
		return u, errors.New("say send or recv")
	case u.BufArg == 0:
		return u, errors.New("say which argument is the buffer (buf=argN)")
	case !lenSet:
		return u, errors.New("say where the length is (len=argN, len=ret or len=ret64)")
	case u.Go && u.LenRet != 0:
		return u, errors.New("a Go function's length must be an argument: uretprobes are unsafe on Go functions (the runtime moves goroutine stacks)")
	}
	for _, n := range []int{u.BufArg, u.LenArg, u.KeyArg} {
		if n > maxArg(u.Go) {
			return u, fmt.Errorf("argument %d is not in a register (at most arg%d)", n, maxArg(u.Go))
		}
	}
	return u, nil
}

func argNum(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(v, "arg"))
	if !strings.HasPrefix(v, "arg") || err != nil || n < 1 {
		return 0, fmt.Errorf("want argN with N from 1, got %q", v)
	}
	return n, nil
}

// uprobe op codes of struct uevent (bpf/uprobe.bpf.c).
const (
	uopTLSWrite = 1
	uopTLSRead  = 2
	uopSend     = 3
	uopRecv     = 4
)

// Where a length is (enum len_src of bpf/uprobe.bpf.c).
const (
	lenArg   = 1
	lenRet   = 2
	lenRet64 = 3
	lenDeref = 4
)

// tlsFuncs are the OpenSSL functions whose calls are TLS plaintext, with their layouts:
// SSL_write(ssl, buf, num) and SSL_read return the bytes moved; the _ex variants return 1 and
// store them in *arg4.
var tlsFuncs = []struct {
	symbol string
	op     uint8
	lenSrc uint8
	lenArg uint8
}{
	{"SSL_write", uopTLSWrite, lenRet, 0},
	{"SSL_read", uopTLSRead, lenRet, 0},
	{"SSL_write_ex", uopTLSWrite, lenDeref, 4},
	{"SSL_read_ex", uopTLSRead, lenDeref, 4},
}
