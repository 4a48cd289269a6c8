package export

import (
	"path/filepath"
	"strconv"

	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/trace"
)

// hostOf returns the index of the input host of connection conn in a merged trace whose
// clocks are cs (0 when the trace is not merged or conn is 0).
func hostOf(cs []trace.Clock, conn uint64) int {
	if len(cs) < 2 || conn == 0 {
		return 0
	}
	h := 0
	for i, c := range cs {
		if c.ConnBase <= conn && c.ConnBase >= cs[h].ConnBase {
			h = i
		}
	}
	return h
}

// hostPID keeps the processes of different hosts of a merged trace apart, since hosts reuse
// pids: host h's pid p becomes p | h<<24 (Linux pids stay below 2^22; lanes use bit 31).
func hostPID(pid uint32, host int) uint32 { return pid | uint32(host&0x7f)<<24 }

// nameHost moves e to its host's process when the trace is a merged one (perflab merge), and
// names that process after the host the first time: "host 1 gpu-box: server.plt (pid 812)".
func (pw *perfettoWriter) nameHost(st *traceState, e *trace.Event) {
	cs := st.meta.Clocks
	h := hostOf(cs, e.Conn)
	if len(cs) < 2 || e.Conn == 0 {
		return
	}
	pid := e.PID
	e.PID = hostPID(e.PID, h)
	if pw.hostNamed[e.PID] {
		return
	}
	if pw.hostNamed == nil {
		pw.hostNamed = map[uint32]bool{}
	}
	pw.hostNamed[e.PID] = true
	n := "host " + strconv.Itoa(h)
	if cs[h].Host != "" {
		n += " " + cs[h].Host
	}
	n += ": " + filepath.Base(cs[h].Input) + " (pid " + strconv.FormatUint(uint64(pid), 10) + ")"
	pw.meta("process_name", e.PID, 0, n)
	if pw.procs[e.PID] {
		return
	}
	pw.procs[e.PID] = true // named: name writes no other process_name for it
}

// hostFlows draws, for the first merged trace of the pass (v saw it), one flow per round trip
// seen at both hosts: from the client's request to the server's receipt of it, on to the
// server's reply and back to the client's receipt of the reply (Chrome trace flow events "s",
// "t", "f", bound to the slices that carried each end).
func (pw *perfettoWriter) hostFlows(v *breakdown.Visitor) error {
	if v.Builder == nil {
		return nil
	}
	cs := v.Builder.Clocks()
	for _, t := range v.Builder.Trips() {
		cpid, spid := hostPID(t.ClientPID, hostOf(cs, t.ClientConn)), hostPID(t.ServerPID, hostOf(cs, t.ServerConn))
		pw.ids++
		id := pw.ids
		name := t.Name
		if name == "" {
			name = "round trip"
		}
		// Each step sits inside the slice of the call it binds to: the start of the first call
		// of a message, or just before the end of the last (its start, when that call took no
		// time).
		pw.flow("s", name, id, cpid, t.ReqTID, t.ReqStart)
		pw.flow("t", name, id, spid, t.SrvInTID, max(t.SrvHas-1, t.SrvRead))
		pw.flow("t", name, id, spid, t.SrvOutTID, t.RepStart)
		pw.flow("f", name, id, cpid, t.RepTID, max(t.RepEnd-1, t.CliRead))
		if pw.err != nil {
			return pw.err
		}
	}
	return nil
}

// flow writes one step of flow id, bound to the enclosing slice at ts on thread (pid, tid).
func (pw *perfettoWriter) flow(ph, name string, id uint64, pid, tid uint32, ts int64) {
	pw.head(ph, "host_flow", name, pid, tid, ts)
	pw.raw(`,"id":`)
	pw.uint(id)
	pw.raw(`,"bp":"e"}`)
}
