package reports

import (
	"fmt"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/evidence"
)

// maxAttribRows bounds the commands of the "where the round-trip time went" table.
const maxAttribRows = 20

// evidenceInShort gives the findings as "In short" lines: what, what it costs, the fix.
func evidenceInShort(s *analyzers.Summary) []string {
	e := s.Evidence
	if e == nil {
		return nil
	}
	var out []string
	for _, f := range e.Findings {
		out = append(out, fmt.Sprintf("Finding: %s. %s; costs %s. Fix: %s.", f.Title, f.Evidence, f.Cost, f.Fix))
	}
	return out
}

// evidenceSections lays out the evidence: where the round-trip time went (overall and per
// command), the findings, the scheduler, TCP connections, set-up and lifetimes.
func evidenceSections(s *analyzers.Summary) []Section {
	e := s.Evidence
	if e == nil {
		return nil
	}
	var out []Section
	if a := e.Attribution; a != nil {
		out = append(out, attributionSection(a, e.Notes))
	}
	if len(e.Findings) > 0 {
		sec := Section{Title: "Findings", Header: []string{"finding", "evidence", "cost", "fix"}}
		for _, f := range e.Findings {
			sec.Rows = append(sec.Rows, []string{f.Title, f.Evidence, f.Cost, f.Fix})
		}
		out = append(out, sec)
	}
	if sc := e.Sched; sc != nil {
		out = append(out, Section{Title: "Scheduler: recorded threads runnable before they ran", Header: []string{"stretches", "p50 µs", "p99 µs", "max µs",
			"woken on an idle CPU", "p50 µs", "woken on a busy CPU", "p50 µs", "preempted", "p50 µs"},
			Rows: [][]string{{Count(sc.Stretches), Num(sc.P50US), Num(sc.P99US), Num(sc.MaxUS), Count(sc.WokenIdle), Num(sc.WokenIdleP50),
				Count(sc.WokenBusy), Num(sc.WokenBusyP50), Count(sc.Preempted), Num(sc.PreemptedP50)}}})
	}
	if len(e.TCP) > 0 {
		out = append(out, tcpSection(e.TCP))
	}
	if st := e.Setup; st != nil {
		out = append(out, Section{Title: "Connection set-up (as tcpconnlat)", Header: []string{"connects", "p50 µs", "p99 µs", "max µs", "accepted", "accept to first message p50 µs"},
			Rows: [][]string{{Count(st.Connects), Num(st.P50US), Num(st.P99US), Num(st.MaxUS), Count(st.Accepted), Num(st.AcceptWaitP50US)}}})
	}
	if len(e.Lifetimes) > 0 {
		out = append(out, lifetimesSection(e.Lifetimes))
	}
	return out
}

// attributionSection lays out where the round-trip time went: overall, then per command (the
// first maxAttribRows), with the evidence's notes.
func attributionSection(a *evidence.Attribution, notes []string) Section {
	header := []string{"command", "round trips"}
	for _, c := range evidence.Causes {
		header = append(header, c+" µs", c+" %")
	}
	sec := Section{Title: "Where the round-trip time went (mean µs per round trip and share, client side)", Header: header}
	row := func(name string, n uint64, cs []evidence.Cause) []string {
		r := []string{name, Count(n)}
		for _, c := range cs {
			r = append(r, Num(c.MeanUS), Share(c.Share))
		}
		return r
	}
	sec.Rows = append(sec.Rows, row("(all)", a.RoundTrips, a.Causes))
	for i, c := range a.Commands {
		if i == maxAttribRows {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%d more commands in --format json", len(a.Commands)-maxAttribRows))
			break
		}
		sec.Rows = append(sec.Rows, row(c.Command, c.RoundTrips, c.Causes))
	}
	sec.Notes = append(sec.Notes, "client: since the previous round trip on the connection; send: the request's calls; waiting: network and server until the reply woke the client; retransmit: waiting that ended in a TCP retransmission; wakeup: runnable on an idle CPU (the CPU waking); runqueue: runnable behind other threads; read: from running to the reply's end")
	if a.NoWakeup > 0 && a.SchedKnown {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%d round trips had no wake-up: the thread did not sleep for the reply", a.NoWakeup))
	}
	sec.Notes = append(sec.Notes, notes...)
	return sec
}

// tcpSection lists the TCP connections' kernel state (the first maxConnRows).
func tcpSection(tcp []evidence.TCPConn) Section {
	sec := Section{Title: "TCP connections (kernel state)", Header: []string{"id", "pid", "local", "remote", "state", "srtt µs", "srtt p50 µs",
		"cwnd", "mss", "retransmits", "zero windows", "bytes acked", "bytes received"}}
	for i, t := range tcp {
		if i == maxConnRows {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%d more in --format json", len(tcp)-maxConnRows))
			break
		}
		sec.Rows = append(sec.Rows, []string{ID(t.ID), ID(uint64(t.PID)), orDash(t.Local), orDash(t.Remote), t.State, Num(t.SRTTUS), Num(t.SRTTP50US),
			Count(uint64(t.Cwnd)), Count(uint64(t.MSS)), Count(t.Retransmits), Count(t.ZeroWindows), Count(t.BytesAcked), Count(t.BytesRecv)})
	}
	return sec
}

// lifetimesSection lists the connections' lifetimes (the first maxConnRows).
func lifetimesSection(ls []evidence.Lifetime) Section {
	sec := Section{Title: "Connection lifetimes (as tcplife)", Header: []string{"id", "pid", "local", "remote", "side", "connect µs", "life ms", "tx bytes", "rx bytes", "messages"}}
	for i, l := range ls {
		if i == maxConnRows {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%d more in --format json", len(ls)-maxConnRows))
			break
		}
		side := "connect"
		if l.Passive {
			side = "accept"
		}
		sec.Rows = append(sec.Rows, []string{ID(l.ID), ID(uint64(l.PID)), orDash(l.Local), orDash(l.Remote), side,
			Num(l.ConnectUS), Num(l.LifeMS), Count(l.TxBytes), Count(l.RxBytes), Count(l.Messages)})
	}
	return sec
}
