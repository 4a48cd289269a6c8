package probes

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/perflab/perflab/trace"
)

func TestParseUprobeSpec(t *testing.T) {
	for _, c := range []struct {
		in   string
		want UprobeSpec
		err  string
	}{
		{in: "/usr/lib/x86_64-linux-gnu/libzmq.so.5:zmq_send,send,buf=arg2,len=arg3,conn=arg1",
			want: UprobeSpec{Path: "/usr/lib/x86_64-linux-gnu/libzmq.so.5", Symbol: "zmq_send", Dir: trace.DirSend, BufArg: 2, LenArg: 3, KeyArg: 1}},
		{in: "libzmq.so.5:zmq_recv,recv,buf=arg2,len=ret,conn=arg1",
			want: UprobeSpec{Path: "libzmq.so.5", Symbol: "zmq_recv", Dir: trace.DirRecv, BufArg: 2, LenRet: 32, KeyArg: 1}},
		{in: "./srv:my_read,recv,buf=arg1,len=ret64",
			want: UprobeSpec{Path: "./srv", Symbol: "my_read", Dir: trace.DirRecv, BufArg: 1, LenRet: 64}},
		{in: "bin/venusd:github.com/perflab/perflab/venusd/transport.shmFrameOut,send,buf=arg1,len=arg2,go",
			want: UprobeSpec{Path: "bin/venusd", Symbol: "github.com/perflab/perflab/venusd/transport.shmFrameOut", Dir: trace.DirSend, BufArg: 1, LenArg: 2, Go: true}},
		{in: "x:f,send,buf=arg8,len=arg9,go", want: UprobeSpec{Path: "x", Symbol: "f", Dir: trace.DirSend, BufArg: 8, LenArg: 9, Go: true}},
		{in: "zmq_send,send,buf=arg2,len=arg3", err: "want PATH:SYMBOL"},
		{in: "lib:,send,buf=arg2,len=arg3", err: "want PATH:SYMBOL"},
		{in: "lib:f,buf=arg2,len=arg3", err: "send or recv"},
		{in: "lib:f,send,len=arg3", err: "buffer"},
		{in: "lib:f,send,buf=arg2", err: "length"},
		{in: "lib:f,send,buf=2,len=arg3", err: "argN"},
		{in: "lib:f,send,buf=arg0,len=arg3", err: "argN"},
		{in: "lib:f,send,buf=arg7,len=arg3", err: "not in a register"},
		{in: "lib:f,send,buf=arg1,len=arg3,color=red", err: "unknown part"},
		{in: "prog:main.recv,recv,buf=arg1,len=ret,go", err: "uretprobes are unsafe on Go"},
	} {
		got, err := ParseUprobeSpec(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one saying %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		c.want.Text = c.in
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.in, diff)
		}
	}
}
