package analyzers

import (
	"fmt"

	"github.com/perflab/perflab/protocol"
)

// BatchStats counts the request frames of venus-mesa connections and the commands split out
// of them (`perflab analyze --format json`: "batches").
type BatchStats struct {
	Frames       uint64 `json:"frames"`            // request frames
	Commands     uint64 `json:"commands"`          // commands found in them
	MultiCommand uint64 `json:"multi_command"`     // frames found to carry more than one command
	NotSplit     uint64 `json:"batched_not_split"` // frames whose commands past the first found could not be told apart
	MaxPerFrame  int    `json:"max_per_frame"`     // most commands found in one frame
}

// batchAgg accumulates BatchStats.
type batchAgg struct {
	st   BatchStats
	seen bool
}

// batch counts the commands of a request frame after its first (the frame itself counts the
// first) and the frame's split.
func (a *analyzer) batch(m *protocol.Message) {
	b := m.Batch
	st := &a.vb.st
	a.vb.seen = true
	st.Frames++
	st.Commands += uint64(len(b.Commands))
	if len(b.Commands) > 1 {
		st.MultiCommand++
	}
	if !b.Split {
		st.NotSplit++
	}
	st.MaxPerFrame = max(st.MaxPerFrame, len(b.Commands))
	for _, bc := range b.Commands[1:] {
		name := bc.Name
		if name == "" {
			name = fmt.Sprintf("cmd%d", bc.ID)
		}
		k := cmdKey{proto: m.Protocol, name: name, id: bc.ID, dir: m.Dir, reply: false}
		ca := a.cmds[k]
		if ca == nil {
			ca = &cmdAgg{}
			a.cmds[k] = ca
		}
		ca.count++
		ca.inTrace = int32(a.cur) + 1
	}
}

// finishBatches puts the batch counts in the summary, with a warning when frames were not
// split.
func (a *analyzer) finishBatches() {
	if !a.vb.seen {
		return
	}
	st := a.vb.st
	a.s.Batches = &st
	if st.NotSplit > 0 {
		a.warnf("venus-mesa: %d of %d request frames batched, not split: commands past the captured bytes are not counted (%s)", st.NotSplit, st.Frames, HeadAdvice(a.s.Meta, "split them"))
	}
}
