package analyzers

import (
	"fmt"

	"github.com/perflab/perflab/loops"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// The event-loop analysis (package loops) rides on analyze's one pass: it sees every event
// and every decoded message, and its report becomes Summary.Loops.

func (a *analyzer) loopBegin(i int) {
	if a.loops == nil {
		a.loops = loops.New()
	}
	a.loops.Begin(i)
	a.loopWaits = false
}

func (a *analyzer) loopEvent(ev *trace.Event) {
	if ev.Op.IsWait() {
		a.loopWaits = true
	}
	a.loops.Event(ev)
}

// loopMessage hands the loop analysis a message; not before the trace's first wait call, since
// until then a loops.Builder takes no message (it has no cycle to count it in).
func (a *analyzer) loopMessage(m *protocol.Message) {
	if !a.loopWaits {
		return
	}
	a.loopMsg = loops.Msg{Trace: m.Trace, PID: m.PID, TID: m.TID, Dir: m.Dir, Request: !m.IsReply,
		Reply: m.IsReply, Answered: m.Answered, End: m.End}
	a.loops.Message(&a.loopMsg)
}

// loopFinish puts the loops found in the Summary, with their warnings.
func (a *analyzer) loopFinish() {
	if a.loops == nil {
		return
	}
	r := a.loops.Report(a.conf)
	if r == nil {
		return
	}
	a.s.Loops = r
	for _, t := range r.Threads {
		for _, w := range t.Warnings {
			a.s.Warnings = append(a.s.Warnings, fmt.Sprintf("event loop pid %d tid %d: %s", t.PID, t.TID, w))
		}
	}
}
