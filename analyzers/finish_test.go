package analyzers

import (
	"reflect"
	"testing"

	"github.com/perflab/perflab/trace"
)

// TestFinishCommandsOrder checks that command rows sharing a name, count, kind and direction
// (venus and venus-mesa both say vkWaitForFences) come out in one order, not the map's.
func TestFinishCommandsOrder(t *testing.T) {
	keys := []cmdKey{
		{proto: "venus-mesa", name: "vkWaitForFences", id: 208, dir: trace.DirRecv, reply: true},
		{proto: "venus", name: "vkWaitForFences", id: 208, dir: trace.DirRecv, reply: true},
		{proto: "raw", name: "?", id: 2, dir: trace.DirSend},
		{proto: "raw", name: "?", id: 1, dir: trace.DirSend},
	}
	var first []CmdStats
	for run := 0; run < 20; run++ {
		a := &analyzer{s: &Summary{}, cmds: map[cmdKey]*cmdAgg{}}
		for _, k := range keys {
			a.cmds[k] = &cmdAgg{name: k.name, count: 1, bytes: 91}
		}
		a.finishCommands()
		if run == 0 {
			first = a.s.Commands
			if first[0].Protocol != "raw" || first[0].ID != 1 || first[2].Protocol != "venus" {
				t.Fatalf("order %+v, want raw 1, raw 2, venus, venus-mesa", first)
			}
			continue
		}
		if !reflect.DeepEqual(a.s.Commands, first) {
			t.Fatalf("run %d: rows %+v, want %+v", run, a.s.Commands, first)
		}
	}
}
