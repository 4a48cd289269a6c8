package protocol

import (
	"bufio"
	"compress/gzip"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/trace"
)

// realVenus is where the Venus Plus recordings with their ground truth live (fixtures/README.md).
const realVenus = "../fixtures/real/venusplus"

// TestVenusMesaCommandNames checks the command list of venus-mesa.json against its sources,
// as published: the VkCommandTypeEXT enum of Venus's vn_protocol_driver_defines.h (the first
// name of each value names it) and Venus Plus's VenusPlusCommandType.
func TestVenusMesaCommandNames(t *testing.T) {
	want := map[uint64]string{}
	b, err := os.ReadFile("testdata/venus-mesa/VkCommandTypeEXT.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`VK_COMMAND_TYPE_(vk\w+?)_EXT = (\d+),`).FindAllStringSubmatch(string(b), -1) {
		id, _ := strconv.ParseUint(m[2], 10, 32)
		if _, dup := want[id]; !dup {
			want[id] = m[1]
		}
	}
	if len(want) < 300 {
		t.Fatalf("excerpt holds %d command types, want the whole enum", len(want))
	}
	b, err = os.ReadFile("testdata/venus-mesa/VenusPlusCommandType.h")
	if err != nil {
		t.Fatal(err)
	}
	vp := regexp.MustCompile(`VENUS_PLUS_CMD_(\w+)\s*=\s*0x([0-9a-fA-F]+)u`).FindAllStringSubmatch(string(b), -1)
	if len(vp) < 4 {
		t.Fatalf("VenusPlusCommandType excerpt holds %d ids", len(vp))
	}
	for _, m := range vp {
		id, _ := strconv.ParseUint(m[2], 16, 32)
		want[id] = m[1]
	}
	sp, err := BuiltinSpec("venus-mesa")
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Commands) != len(want) {
		t.Errorf("venus-mesa.json names %d commands, the sources %d", len(sp.Commands), len(want))
	}
	for id, name := range want {
		if got := sp.CommandName(id); got != name {
			t.Errorf("command %d (%#x): spec says %q, source %q", id, id, got, name)
		}
	}
	for _, c := range []struct {
		id   uint64
		name string
	}{{148, "vkGetPhysicalDeviceProperties2"}, {0x10000002, "TRANSFER_MEMORY_BATCH"}, {0x10000003, "READ_MEMORY_BATCH"}} {
		if got := sp.CommandName(c.id); got != c.name {
			t.Errorf("command %#x: %q, want %q", c.id, got, c.name)
		}
	}
}

// TestVenusMesaLayoutCoversCommands checks that the generated layouts parse and give every
// command of the enum a layout, except the few that Venus does not encode as vk.xml says.
func TestVenusMesaLayoutCoversCommands(t *testing.T) {
	l, err := venusLayouts()
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := BuiltinSpec("venus-mesa")
	var missing []string
	for _, c := range sp.Commands {
		if c.ID >= venusPlusBase {
			continue
		}
		if !l.known[uint32(c.ID)] {
			t.Errorf("command %s (%d) has no layout line", c.Name, c.ID)
		}
		if _, ok := l.cmds[uint32(c.ID)]; !ok {
			missing = append(missing, c.Name)
		}
	}
	sort.Strings(missing)
	// vkMapMemory, vkMapMemory2: a host pointer out; vkGetMemoryFdPropertiesKHR: a file
	// descriptor; vkUpdateDescriptorSetWithTemplate and vkCmdPushDescriptorSetWithTemplate:
	// data laid out by a template; the rest reach platform or video structs.
	if len(missing) > 40 {
		t.Errorf("%d commands without a layout: %v", len(missing), missing)
	}
	t.Logf("%d commands without a layout: %v", len(missing), missing)
}

// frameRow is one request frame of a frames.tsv: its first u32 and the commands the server
// dispatched for it.
type frameRow struct {
	payload int64
	first   uint64
	cmds    []string
}

func readFrames(t *testing.T, path string) []frameRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []frameRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) < 9 || c[0] == "req" {
			continue
		}
		p, _ := strconv.ParseInt(c[1], 10, 64)
		first, _ := strconv.ParseUint(strings.TrimPrefix(c[2], "0x"), 16, 32)
		rows = append(rows, frameRow{payload: p, first: first, cmds: strings.Fields(c[8])})
	}
	return rows
}

// TestVenusMesaRealFrames decodes the Venus Plus recordings (server and client side, two
// phases) and checks every request frame against the server's own dispatch log: its commands
// in order when the frame was split, the ones found when it was not, and that a frame is "not
// split" only when it is longer than the captured bytes reach. No command goes unnamed.
func TestVenusMesaRealFrames(t *testing.T) {
	for _, tc := range []struct {
		file, frames string
		reqDir       trace.Dir
		notSplit     int // frames longer than the capture: phase 9's frames 102, 103 (vkCreateShaderModule, 1368 bytes) and 116
	}{
		{"server-phase2.plt", "server-phase2.frames.tsv", trace.DirRecv, 0},
		{"client-phase2.plt", "server-phase2.frames.tsv", trace.DirSend, 0},
		{"server-phase9.plt", "server-phase9.frames.tsv", trace.DirRecv, 3},
		{"client-phase9.plt", "server-phase9.frames.tsv", trace.DirSend, 3},
	} {
		t.Run(tc.file, func(t *testing.T) {
			rows := readFrames(t, filepath.Join(realVenus, tc.frames))
			i, notSplit, dispatched, found := 0, 0, 0, 0
			for _, r := range rows {
				if r.first < venusPlusBase {
					dispatched += len(r.cmds)
				}
			}
			err := Messages(Files([]string{filepath.Join(realVenus, tc.file)}, nil), nil, func(m *Message) error {
				if m.Protocol != "venus-mesa" {
					t.Fatalf("protocol %q, want venus-mesa", m.Protocol)
				}
				if m.Name == "" || strings.HasPrefix(m.Name, "cmd") {
					t.Errorf("%v frame at %d: command %d unnamed (%q)", m.Dir, m.TS, m.Command, m.Name)
				}
				if m.Dir != tc.reqDir {
					return nil
				}
				if i >= len(rows) {
					t.Fatalf("more request frames than the %d of %s", len(rows), tc.frames)
				}
				r := rows[i]
				i++
				if m.IsReply {
					t.Errorf("request frame %d (%s) taken for a reply", i, m.Name)
					return nil
				}
				if m.Size-8 != r.payload || m.Command != r.first {
					t.Errorf("frame %d: %d bytes, first %#x; ground truth %d, %#x", i, m.Size-8, m.Command, r.payload, r.first)
				}
				if m.Batch == nil {
					t.Fatalf("frame %d (%s): no batch", i, m.Name)
				}
				var got []string
				for _, c := range m.Batch.Commands {
					got = append(got, c.Name)
				}
				if r.first >= venusPlusBase {
					if len(got) != 1 || !m.Batch.Split || !m.WantsReply {
						t.Errorf("frame %d (%s): %v split %v wants %v, want one command that wants a reply", i, m.Name, got, m.Batch.Split, m.WantsReply)
					}
					return nil
				}
				found += len(got)
				if m.Batch.Split {
					if strings.Join(got, " ") != strings.Join(r.cmds, " ") {
						t.Errorf("frame %d: split into %v, the server dispatched %v", i, got, r.cmds)
					}
					return nil
				}
				notSplit++
				if r.payload+8 <= framePeek-8 {
					t.Errorf("frame %d (%d bytes) fits in the capture, yet was not split: found %v of %v", i, r.payload, got, r.cmds)
				}
				if len(got) > len(r.cmds) || strings.Join(got, " ") != strings.Join(r.cmds[:len(got)], " ") {
					t.Errorf("frame %d, not split: found %v, the server dispatched %v", i, got, r.cmds)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if i != len(rows) {
				t.Errorf("%d request frames, ground truth %d", i, len(rows))
			}
			if notSplit != tc.notSplit {
				t.Errorf("%d frames not split, want %d", notSplit, tc.notSplit)
			}
			t.Logf("%d request frames, %d Venus commands found of %d dispatched, %d frames not split", i, found, dispatched, notSplit)
		})
	}
}

var straceRead = regexp.MustCompile(`^\d+ [\d:.]+ read\(4, "((?:\\x[0-9a-f]{2})*)", \d+\) = (\d+)`)

// TestVenusMesaSplitWholeFrames splits the request frames of the strace of phase 9, which
// holds every byte, and checks that every Venus frame splits into exactly the commands the
// server dispatched for it: the layouts are right for whole frames, not only for their heads.
func TestVenusMesaSplitWholeFrames(t *testing.T) {
	f, err := os.Open(filepath.Join(realVenus, "server-phase9.strace.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var stream []byte
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		m := straceRead.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		b, err := hex.DecodeString(strings.ReplaceAll(m[1], `\x`, ""))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, b...)
	}
	rows := readFrames(t, filepath.Join(realVenus, "server-phase9.frames.tsv"))
	sp, _ := BuiltinSpec("venus-mesa")
	i, cmds := 0, 0
	for len(stream) >= 8 {
		if le.Uint32(stream) != 0x56504C53 {
			t.Fatalf("frame %d: bad magic", i+1)
		}
		n := int(le.Uint32(stream[4:]))
		payload := stream[8 : 8+n]
		stream = stream[8+n:]
		if i >= len(rows) {
			t.Fatalf("more frames than the ground truth's %d", len(rows))
		}
		r := rows[i]
		i++
		if r.first >= venusPlusBase {
			continue
		}
		s := splitVenus(payload, int64(n))
		var got []string
		for _, c := range s.cmds[:s.n] {
			got = append(got, sp.CommandName(uint64(c.id)))
		}
		if !s.split || strings.Join(got, " ") != strings.Join(r.cmds, " ") {
			t.Errorf("frame %d (%d bytes): split %v into %v, the server dispatched %v", i, n, s.split, got, r.cmds)
		}
		cmds += len(got)
	}
	if i != len(rows) || cmds != 123 {
		t.Errorf("%d frames, %d commands; want %d and 123", i, cmds, len(rows))
	}
}

// TestVenusMesaCoalesced checks Venus Plus's coalescing envelopes: the Venus command stream a
// COALESCE_SUBMIT or COALESCE_WAIT carries is split too (built from real frames of phase 9:
// the command buffer of frame 106 after a memory batch, the vkWaitForFences of frame 110 before
// a read batch).
func TestVenusMesaCoalesced(t *testing.T) {
	fr := realVenusFrames(t)
	frame := func(payload []byte) []byte {
		b := le.AppendUint32(nil, 0x56504C53)
		b = le.AppendUint32(b, uint32(len(payload)))
		return append(b, payload...)
	}
	envelope := func(cmd uint32, a, b []byte) []byte {
		p := le.AppendUint32(nil, cmd)
		p = le.AppendUint32(p, 3)
		p = le.AppendUint32(p, uint32(len(a)))
		p = le.AppendUint32(p, uint32(len(b)))
		return frame(append(append(p, a...), b...))
	}
	transfer := make([]byte, 40)
	read := fr[111-1][8:] // a READ_MEMORY_BATCH request
	for _, tc := range []struct {
		name  string
		data  []byte
		head  int
		want  []string
		split bool
	}{
		{"submit", envelope(vpCoalesceSubmit, transfer, fr[106-1][8:]), 255,
			[]string{"COALESCE_SUBMIT", "vkCmdBindPipeline", "vkCmdBindDescriptorSets", "vkCmdDispatch", "vkEndCommandBuffer"}, true},
		{"wait", envelope(vpCoalesceWait, fr[110-1][8:], read), 255, []string{"COALESCE_WAIT", "vkWaitForFences"}, true},
		{"submit past the head", envelope(vpCoalesceSubmit, make([]byte, 300), fr[106-1][8:]), 255, []string{"COALESCE_SUBMIT"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, _ := BuiltinSpec("venus-mesa")
			msgs := feedOne(t, sp, tc.data, tc.head)
			if len(msgs) != 1 || msgs[0].Batch == nil {
				t.Fatalf("messages %+v", msgs)
			}
			var got []string
			for _, c := range msgs[0].Batch.Commands {
				got = append(got, c.Name)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") || msgs[0].Batch.Split != tc.split || !msgs[0].WantsReply {
				t.Errorf("commands %v split %v wants %v, want %v split %v", got, msgs[0].Batch.Split, msgs[0].WantsReply, tc.want, tc.split)
			}
		})
	}
}

// feedOne decodes data as one call of a client, with head bytes captured.
func feedOne(t *testing.T, spec *Spec, data []byte, head int) []Message {
	var got []Message
	out := &msgSink{fn: func(m *Message) error {
		c := *m
		if m.Batch != nil {
			b := *m.Batch
			b.Commands = append([]BatchCmd(nil), b.Commands...)
			c.Batch = &b
		}
		got = append(got, c)
		return nil
	}}
	d, err := NewDecoder(0, spec, out)
	if err != nil {
		t.Fatal(err)
	}
	ev := trace.Event{TS: 1, Dur: 10, PID: 1, Conn: 7, Dir: trace.DirSend, Op: trace.OpSendto, Source: trace.SourceEBPF,
		Bytes: int64(len(data)), Payload: data[:min(head, len(data))]}
	d.Event(&ev)
	d.Flush()
	return got
}
