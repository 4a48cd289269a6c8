package device

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/perflab/perflab/venusd/wire"
)

// cmd builds one command with little-endian u64/u32 arguments (a uint32 value is written as 4
// bytes, anything else as 8).
func cmd(t wire.CommandType, args ...any) *wire.Command {
	var b []byte
	for _, a := range args {
		switch v := a.(type) {
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case int:
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return &wire.Command{Type: t, ReqID: 1, Args: b}
}

func TestDeviceQuotasAndBudget(t *testing.T) {
	var live Budget
	live.MaxBytes = 1 << 10
	d := New(2, 1<<20, 1<<10, &live)
	host := uint32(wire.MemHostVisible)
	for _, tc := range []struct {
		name string
		c    *wire.Command
		want int32
	}{
		{"allocate", cmd(wire.CmdAllocateMemory, 1, 512, host), wire.VkSuccess},
		{"same id again", cmd(wire.CmdAllocateMemory, 1, 64, host), wire.VkErrorValidationFailed},
		{"past the server's budget", cmd(wire.CmdAllocateMemory, 2, 1024, host), wire.VkErrorOutOfDeviceMemory},
		{"second object", cmd(wire.CmdAllocateMemory, 2, 256, host), wire.VkSuccess},
		{"third object: too many", cmd(wire.CmdAllocateMemory, 3, 8, host), wire.VkErrorTooManyObjects},
		{"map whole", cmd(wire.CmdMapMemory, 1, 0, WholeSize), wire.VkSuccess},
		{"map twice", cmd(wire.CmdMapMemory, 1, 0, WholeSize), wire.VkErrorValidationFailed},
		{"free unknown", cmd(wire.CmdFreeMemory, 9), wire.VkErrorValidationFailed},
	} {
		got, err := d.Exec(tc.c, nil)
		if err != nil || got != tc.want {
			t.Errorf("%s: %s, %v; want %s", tc.name, wire.ResultName(got), err, wire.ResultName(tc.want))
		}
	}
	if live.Objects.Load() != 2 || live.Bytes.Load() != 768 {
		t.Errorf("budget holds %d objects, %d bytes; want 2, 768", live.Objects.Load(), live.Bytes.Load())
	}
	if room := live.Room(); room != 256 {
		t.Errorf("room %d, want 256", room)
	}
	d.Release()
	if live.Objects.Load() != 0 || live.Bytes.Load() != 0 {
		t.Errorf("after Release the budget holds %d objects, %d bytes", live.Objects.Load(), live.Bytes.Load())
	}
}

func TestDevicePingAndMalformed(t *testing.T) {
	d := New(8, 1<<20, 100, nil)
	var out wire.Encoder
	out.Reset()
	if got, err := d.Exec(cmd(wire.CmdPing, uint32(40)), &out); err != nil || got != wire.VkSuccess || out.Len() != wire.HeaderSize+40 {
		t.Errorf("ping 40: %s, %v, frame %d bytes", wire.ResultName(got), err, out.Len())
	}
	if got, _ := d.Exec(cmd(wire.CmdPing, uint32(400)), &out); got != wire.VkErrorOutOfHostMemory {
		t.Errorf("ping past the reply cap: %s", wire.ResultName(got))
	}
	d.SetMaxReply(1000)
	if got, _ := d.Exec(cmd(wire.CmdPing, uint32(400)), &out); got != wire.VkSuccess {
		t.Errorf("ping 400 after SetMaxReply(1000): %s", wire.ResultName(got))
	}
	if _, err := d.Exec(cmd(wire.CmdAllocateMemory, 1), nil); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("short arguments: %v, want ErrMalformed", err)
	}
	if _, err := d.Exec(cmd(wire.CommandType(12345)), nil); err == nil {
		t.Error("unknown command accepted")
	}
}
