package venusd

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/perflab/perflab/venusd/wire"

	"github.com/perflab/perflab/venusd/transport"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The example of docs/venus-protocol.md, byte for byte, and the server's answer to it.
func TestProtocolDocExample(t *testing.T) {
	req := frameOf(cmdOf(wire.CmdPing, wire.FlagReplyWanted, 1, func(e *wire.Encoder) { e.U32(8) }))
	want := unhex(t, "534c5056 14000000 02000010 01000000 04000000 01000000 08000000")
	if !bytes.Equal(req, want) {
		t.Fatalf("ping frame\n got % x\nwant % x", req, want)
	}
	s := startServer(t, ServerConfig{Listen: "tcp://127.0.0.1:0", Getenv: noEnv})
	c := dialRaw(t, s.Addr())
	c.send(req)
	got := make([]byte, 36)
	c.nc.SetReadDeadline(timeIn(t))
	if _, err := readFull(c.nc, got); err != nil {
		t.Fatal(err)
	}
	wantRep := unhex(t, "534c5056 1c000000 02000010 02000000 0c000000 01000000 00000000 0000000000000000")
	if !bytes.Equal(got, wantRep) {
		t.Fatalf("reply\n got % x\nwant % x", got, wantRep)
	}
}

func TestParseAddrAndBytes(t *testing.T) {
	for _, tc := range []struct {
		in, tr, where string
		ok            bool
	}{
		{"tcp://127.0.0.1:5556", "tcp", "127.0.0.1:5556", true},
		{"tcp://[::1]:1", "tcp", "[::1]:1", true},
		{"unix:///run/v.sock", "unix", "/run/v.sock", true},
		{"shm:///ring-1.a_b", "shm", "ring-1.a_b", true},
		{"shm:///../etc", "", "", false},
		{"shm:///", "", "", false},
		{"tcp://nohost", "", "", false},
		{"http://x:1", "", "", false},
		{"127.0.0.1:5556", "", "", false},
	} {
		a, err := transport.ParseAddr(tc.in)
		if (err == nil) != tc.ok || (tc.ok && (a.Transport != tc.tr || a.Where != tc.where)) {
			t.Errorf("transport.ParseAddr(%q) = %+v, %v", tc.in, a, err)
		}
		if tc.ok && a.String() != tc.in {
			t.Errorf("%q round-trips to %q", tc.in, a.String())
		}
	}
	for _, m := range Modes {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
}
