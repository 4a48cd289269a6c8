package protocol

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGGMLNoReplyByVersion(t *testing.T) {
	s, err := BuiltinSpec("ggml-rpc")
	if err != nil {
		t.Fatal(err)
	}
	id := func(n string) uint64 {
		for _, c := range s.Commands {
			if c.Name == n {
				return c.ID
			}
		}
		t.Fatalf("no command %s", n)
		return 0
	}
	for _, tc := range []struct {
		v       [3]int
		cmd     string
		replies bool
	}{
		{[3]int{1, 0, 0}, "SET_TENSOR", true},
		{[3]int{2, 0, 0}, "SET_TENSOR", false},
		{[3]int{2, 0, 0}, "GRAPH_COMPUTE", true},
		{[3]int{3, 0, 0}, "GRAPH_COMPUTE", false},
		{[3]int{3, 6, 0}, "GRAPH_RECOMPUTE", false},
		{[3]int{5, 0, 0}, "GET_TENSOR", true},
		{[3]int{5, 0, 0}, "HELLO", true},
		{[3]int{5, 0, 0}, "MEMSET_TENSOR", true},
	} {
		if got := s.WantsReply(id(tc.cmd), tc.v); got != tc.replies {
			t.Errorf("%s at %v: reply %v, want %v", tc.cmd, tc.v, got, tc.replies)
		}
	}
	if s.CommandName(14) != "HELLO" || s.CommandName(17) != "MEMSET_TENSOR" || s.CommandName(99) != "" {
		t.Errorf("names: %q %q %q", s.CommandName(14), s.CommandName(17), s.CommandName(99))
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{}`, "name missing"},
		{`{"name":"x"}`, "request header missing"},
		{`{"name":"x","request":{"bytes":4,"size":{"offset":2,"size":4}}}`, "outside"},
		{`{"name":"x","request":{"bytes":4,"size":{"offset":0,"size":3}}}`, "want 1, 2, 4 or 8"},
		{`{"name":"x","kind":"xml"}`, "kind"},
		{`{"name":"x","request":{"bytes":1000,"size":{"offset":0,"size":4}}}`, "header bytes"},
		{`{"name":"x","request":{"bytes":4,"size":{"offset":0,"size":4}},"unit_commands":["GO"]}`, "not in commands"},
		{`{"name":"x","bogus":1}`, "unknown field"},
		{`{"name":"x","version":"1.x","request":{"bytes":4,"size":{"offset":0,"size":4}}}`, "version"},
	} {
		_, err := ParseSpec(strings.NewReader(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.json, err, tc.want)
		}
	}
}

// A user's own spec file decodes like a built-in.
func TestLoadSpecFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.json")
	spec := `{"name":"kv","endian":"big","default_reply":true,
	  "request":{"bytes":6,"magic":{"offset":0,"size":2,"value":51966},"size":{"offset":2,"size":4},"command":{"offset":6,"size":1}},
	  "reply":{"bytes":6,"magic":{"offset":0,"size":2,"value":51966},"size":{"offset":2,"size":4}},
	  "commands":[{"id":1,"name":"GET"},{"id":2,"name":"PUT"}],
	  "no_reply":[{"min_version":"0","commands":["PUT"]}]}`
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	frame := func(cmd byte, payload int) []byte {
		b := []byte{0xca, 0xfe, 0, 0, 0, byte(payload)}
		if cmd != 0 {
			b = append(b, cmd)
			payload--
		}
		return append(b, make([]byte, payload)...)
	}
	var data, cuts []byte
	for _, f := range [][]byte{frame(2, 10), frame(1, 4), frame(0, 8)} {
		data = append(data, f...)
	}
	cuts = []byte{15, 9, 0x80 | 13} // lengths 16, 10, 14 (the top bit: received)
	msgs := feed(t, s, data, cuts, 64)
	if len(msgs) != 3 || msgs[0].Name != "PUT" || msgs[0].WantsReply || msgs[1].Name != "GET" || !msgs[1].WantsReply ||
		!msgs[2].IsReply || msgs[2].Name != "GET" || msgs[2].RTT <= 0 {
		t.Errorf("messages %+v", msgs)
	}
	if _, err := LoadSpec(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("missing spec file loaded")
	}
}

// The Vulkan specs class the calls of a token loop (perflab model) in their data: submits,
// sync points, the rest async; a spec without classes makes every call async, and a name in
// two classes is refused.
func TestCallClasses(t *testing.T) {
	for _, name := range []string{"venus", "venus-mesa"} {
		s, err := BuiltinSpec(name)
		if err != nil {
			t.Fatal(err)
		}
		for call, want := range map[string]CallClass{
			"vkQueueSubmit": ClassSubmit, "vkQueueSubmit2": ClassSubmit,
			"vkWaitForFences": ClassSync, "vkGetFenceStatus": ClassSync, "vkQueueWaitIdle": ClassSync,
			"vkDeviceWaitIdle": ClassSync, "vkInvalidateMappedMemoryRanges": ClassSync,
			"vnReadMemoryData": ClassSync, "vkGetQueryPoolResults": ClassSync,
			"vkCmdDraw": ClassAsync, "vkFlushMappedMemoryRanges": ClassAsync, "": ClassAsync,
		} {
			if got := s.CallClass(call); got != want {
				t.Errorf("%s: class of %q is %d, want %d", name, call, got, want)
			}
		}
		// every class names a command the spec knows, but those of the other Venus
		named := map[string]bool{}
		for _, c := range s.Commands {
			named[c.Name] = true
		}
		for _, n := range append(append([]string(nil), s.SubmitCommands...), s.SyncCommands...) {
			if !named[n] && n != "vkQueueSubmit2" && n != "vnReadMemoryData" {
				t.Errorf("%s: classes %q, which is none of its commands", name, n)
			}
		}
	}
	g, err := BuiltinSpec("ggml-rpc")
	if err != nil {
		t.Fatal(err)
	}
	if g.CallClass("GRAPH_COMPUTE") != ClassAsync || g.CallClass("vkQueueSubmit") != ClassAsync {
		t.Error("ggml-rpc classes calls it does not name")
	}
	for _, bad := range []string{
		`{"name":"x","kind":"raw","submit_commands":["a"],"sync_commands":["a"]}`,
		`{"name":"x","kind":"raw","sync_commands":[""]}`,
	} {
		if _, err := ParseSpec(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed, want an error", bad)
		}
	}
}
