//go:build linux && amd64

package probes

import (
	"fmt"
	"strconv"

	"github.com/cilium/ebpf"

	"github.com/perflab/perflab/trace"
)

// evidenceProbe is the loaded evidence object (bpf/evidence.bpf.c), sharing the base object's
// ring buffer, targets, counters, announced sockets and per-thread storage.
type evidenceProbe struct {
	progs []namedProg // the attached programs
	buf   []byte      // payload of the event being converted
	bad   uint64      // records that did not decode
}

// evidenceParts are the programs of each evidence part.
var evidenceParts = []struct {
	part  Evidence
	names []string
}{
	{EvidenceSched, []string{"perflab_wake", "perflab_wakenew", "perflab_runq"}},
	{EvidenceTCP, []string{"perflab_retrans", "perflab_tcprcv"}},
	{EvidenceConn, []string{"perflab_tcpstate"}},
}

// openEvidence loads the evidence object with the programs of the parts in cfg.Evidence,
// attaches them, and decodes its records.
func (p *Probe) openEvidence() error {
	spec, err := loadEvidence()
	if err != nil {
		return fmt.Errorf("load evidence spec: %w", err)
	}
	// Only the presence of a thread's storage is tested: the map is the base object's, with
	// its value size.
	tasks := p.objs.PerflabTasks.ValueSize()
	spec.Maps["perflab_tasks"].ValueSize = tasks
	spec.Maps["perflab_tasks"].Value = nil
	spec.Maps["perflab_socks"].ValueSize = p.objs.PerflabSocks.ValueSize()
	spec.Maps["perflab_socks"].Value = nil
	spec.Maps["perflab_events"].MaxEntries = p.objs.PerflabEvents.MaxEntries()
	keep := map[string]bool{}
	for _, g := range evidenceParts {
		if p.cfg.Evidence&g.part != 0 {
			for _, n := range g.names {
				keep[n] = true
			}
		}
	}
	for n := range spec.Programs {
		if !keep[n] {
			delete(spec.Programs, n)
		}
	}
	coll, err := p.loadObject(spec)
	if err != nil {
		return fmt.Errorf("evidence probe: %w", err)
	}
	ev := &evidenceProbe{}
	for _, g := range evidenceParts {
		for _, n := range g.names {
			if pr := coll.Programs[n]; pr != nil {
				ev.progs = append(ev.progs, namedProg{n, pr})
			}
		}
	}
	p.ev = ev
	p.registerKind(kindSched, func(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
		return p.handleEvidence(kindSched, b, out, emit)
	})
	p.registerKind(kindTCP, func(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
		return p.handleEvidence(kindTCP, b, out, emit)
	})
	return nil
}

// evidenceCounts reads the evidence counters (slots of perflab_counts, bpf/common.h): records
// lost, sched records, tcp records.
func (p *Probe) evidenceCounts() (lost, sched, tcp uint64) {
	read := func(slot uint32) uint64 {
		var per []uint64
		if p.objs.PerflabCounts == nil || p.objs.PerflabCounts.Lookup(slot, &per) != nil {
			return 0
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		return sum
	}
	return read(cntEvLost), read(cntEvSched), read(cntEvTCP)
}

// handleEvidence converts an evidence record (kind sched or tcp) and emits it.
func (p *Probe) handleEvidence(kind uint8, b []byte, out *trace.Record, emit func(*trace.Record) error) error {
	ev := p.ev
	if ev == nil {
		p.bad++
		return nil
	}
	switch kind {
	case kindSched:
		var r rawSched
		if err := decodeSched(b, &r); err != nil {
			ev.bad++
			return nil
		}
		out.Kind = trace.KindEvent
		ev.buf = schedEvent(&r, ev.buf, &out.Event)
		return emit(out)
	case kindTCP:
		var r rawTCP
		if err := decodeTCP(b, &r); err != nil {
			ev.bad++
			return nil
		}
		cs := p.conns[r.Cookie]
		if cs == nil {
			// A connection seen by its state before any message: known by its family and
			// ports until its identity is announced.
			cs = p.newConn(r.Cookie, int64(r.TS))
			cs.conn.Family = trace.FamilyTCP
			cs.conn.PID = r.PID
			// Only the ports are known until a message announces the addresses.
			if r.Info.LPort != 0 {
				cs.conn.Local = ":" + strconv.Itoa(int(r.Info.LPort))
			}
			if r.Info.RPort != 0 {
				cs.conn.Remote = ":" + strconv.Itoa(int(r.Info.RPort))
			}
			*out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
			if err := emit(out); err != nil {
				return err
			}
		}
		if int64(r.TS) > cs.conn.LastSeen {
			cs.conn.LastSeen = int64(r.TS)
		}
		pid := r.PID
		if pid == 0 {
			pid = cs.conn.PID
		}
		out.Kind = trace.KindEvent
		ev.buf = tcpEvent(&r, cs.conn.ID, pid, ev.buf, &out.Event)
		return emit(out)
	}
	p.bad++
	return nil
}

// evidenceStats adds the evidence object's counters and costs to the footer stats st:
// evidence_parts (the bit set), evidence_sched_records, evidence_tcp_records,
// evidence_lost_records, evidence_bad_records, and from the run-time statistics
// evidence_ns_per_run (all runs inside the statistics windows, net of the statistics' own
// cost) and evidence_other_ns_per_wakeup / evidence_other_ns_per_switch (what a wake-up and a
// context switch of a process that is not recorded pay, measured at Open).
func (p *Probe) evidenceStats(st map[string]int64, stats map[string]ebpf.ProgramStats) {
	ev := p.ev
	if ev == nil {
		return
	}
	st["evidence_parts"] = int64(p.cfg.Evidence)
	lost, sched, tcp := p.evidenceCounts()
	st["evidence_sched_records"] = int64(sched)
	st["evidence_tcp_records"] = int64(tcp)
	st["evidence_lost_records"] = int64(lost)
	if ev.bad > 0 {
		st["evidence_bad_records"] = int64(ev.bad)
	}
	if p.cost.statsErr != nil {
		return
	}
	nop := p.cost.nopNs
	var ns, runs uint64
	for _, pr := range ev.progs {
		s, c := stats[pr.name], p.cost.calib[pr.name]
		ns += uint64(s.Runtime - c.Runtime)
		runs += s.RunCount - c.RunCount
	}
	if runs > 0 {
		st["evidence_ns_per_run"] = int64(max(0, float64(ns)/float64(runs)-nop) + 0.5)
	}
	per := func(name string) (float64, bool) {
		c, ok := p.cost.calib[name]
		if !ok || c.RunCount == 0 {
			return 0, false
		}
		return max(0, float64(c.Runtime)/float64(c.RunCount)-nop), true
	}
	if v, ok := per("perflab_wake"); ok {
		st["evidence_other_ns_per_wakeup"] = int64(v + 0.5)
	}
	if v, ok := per("perflab_runq"); ok {
		st["evidence_other_ns_per_switch"] = int64(v + 0.5)
	}
}
