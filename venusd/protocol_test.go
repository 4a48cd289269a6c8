package venusd

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/perflab/perflab/venusd/wire"
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

func TestParseMode(t *testing.T) {
	for _, m := range Modes {
		if got, err := ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v", m, got, err)
		}
	}
}
