package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/perflab/perflab/analyzers"
)

// maxConnRows bounds the connections listed by the table and markdown reports, as
// htmlMaxConns does for HTML.
const maxConnRows = htmlMaxConns

// maxCommandRows bounds the commands listed; the rest are summed in one row.
const maxCommandRows = 30

// sections lays a Summary out as report sections.
func sections(s *analyzers.Summary) []Section {
	var out []Section
	if a := answer(s); len(a) > 0 {
		out = append(out, Section{Title: "In short", Notes: a})
	}
	for _, lay := range []func(*analyzers.Summary) []Section{
		overviewSection, func(s *analyzers.Summary) []Section { return twoHostsSections(s.TwoHosts) }, connectionsSection, processesSection, commandsSection, statusesSection,
		roundTripsSection, unitsSection, unitShapesSection, phasesSection, littleSection, batchSection,
		modesSection, windowsSection, func(s *analyzers.Summary) []Section { return loopSections(s.Loops) },
		errorsSection, evidenceSections,
	} {
		out = append(out, lay(s)...)
	}
	return out
}

// overviewSection lays out the overview: the traces, the protocol and how much of the data it
// decoded, event and byte totals, recovery and batching.
func overviewSection(s *analyzers.Summary) []Section {
	ov := Section{Title: "Overview", Header: []string{"what", "value"}}
	ov.Rows = append(ov.Rows,
		[]string{"traces", strings.Join(s.Traces, ", ")},
		[]string{"protocol", orDash(s.Protocol)},
		[]string{"events", Count(s.Events)},
		[]string{"lost events", Count(s.Lost)},
		[]string{"duration", fmt.Sprintf("%s s", Num(s.Duration))},
		[]string{"send", fmt.Sprintf("%s calls, %s bytes, %s frames", Count(s.Totals.Send.Calls), Count(s.Totals.Send.Bytes), Count(s.Totals.Send.Frames))},
		[]string{"recv", fmt.Sprintf("%s calls, %s bytes, %s frames", Count(s.Totals.Recv.Calls), Count(s.Totals.Recv.Bytes), Count(s.Totals.Recv.Frames))},
	)
	if d := s.Decoding; d != nil {
		row := []string{"decoded", decodingText(d)}
		ov.Rows = append(ov.Rows[:2], append([][]string{row}, ov.Rows[2:]...)...)
	}
	if t := s.TLS; t != nil {
		ov.Rows = append(ov.Rows, []string{"tls", fmt.Sprintf("%d connections: plaintext %s+%s calls, %s bytes (decoded); ciphertext %s+%s system calls, %s bytes (in send/recv above, not decoded)",
			t.Connections, Count(t.Plaintext.Send.Calls), Count(t.Plaintext.Recv.Calls), Count(t.Plaintext.Send.Bytes+t.Plaintext.Recv.Bytes),
			Count(t.Ciphertext.Send.Calls), Count(t.Ciphertext.Recv.Calls), Count(t.Ciphertext.Send.Bytes+t.Ciphertext.Recv.Bytes))})
	}
	if s.Recovery != nil {
		ov.Rows = append(ov.Rows, []string{"recovery", s.Recovery.String()})
	}
	if b := s.Batches; b != nil {
		ov.Rows = append(ov.Rows, []string{"batched commands", fmt.Sprintf("%s commands in %s request frames (%s of several, at most %d in one); %s batched, not split",
			Count(b.Commands), Count(b.Frames), Count(b.MultiCommand), b.MaxPerFrame, Count(b.NotSplit))})
	}
	return []Section{ov}
}

// connectionsSection lays out connections: per connection its calls, bytes and system-call
// latencies, at most maxConnRows.
func connectionsSection(s *analyzers.Summary) []Section {
	if len(s.Connections) == 0 {
		return nil
	}
	c := Section{Title: "Connections (latency columns: system-call durations)", Header: []string{"id", "family", "local", "remote", "pid",
		"send calls", "send bytes", "send call p50 µs", "send call p99 µs", "recv calls", "recv bytes", "recv call p50 µs", "recv call p99 µs"}}
	multi := len(s.Traces) > 1
	if multi {
		c.Header = append([]string{"trace"}, c.Header...)
	}
	conns := s.Connections
	if len(conns) > maxConnRows {
		// A server with many clients: a table of every connection is no report (and costs
		// seconds to lay out); the JSON lists them all.
		c.Notes = append(c.Notes, fmt.Sprintf("%d more connections not shown (the first %d in the trace are); --format json lists them all", len(conns)-maxConnRows, maxConnRows))
		conns = conns[:maxConnRows]
	}
	for _, x := range conns {
		c.Rows = append(c.Rows, withTrace(multi, x.Trace, []string{ID(x.ID), x.Family, orDash(x.Local), orDash(x.Remote), ID(uint64(x.PID)),
			Count(x.Send.Calls), Count(x.Send.Bytes), Num(x.Send.LatencyUS.P50), Num(x.Send.LatencyUS.P99),
			Count(x.Recv.Calls), Count(x.Recv.Bytes), Num(x.Recv.LatencyUS.P50), Num(x.Recv.LatencyUS.P99)}))
	}
	return []Section{c}
}

// processesSection lays out processes: per process its connections, calls, bytes, frames, round
// trips and blocked time.
func processesSection(s *analyzers.Summary) []Section {
	if len(s.Processes) == 0 {
		return nil
	}
	p := Section{Title: "Processes", Header: []string{"pid", "connections", "send calls", "send bytes", "send frames",
		"recv calls", "recv bytes", "recv frames", "round trips", "blocked s"}}
	multi := len(s.Traces) > 1
	if multi {
		p.Header = append([]string{"trace"}, p.Header...)
	}
	for _, x := range s.Processes {
		p.Rows = append(p.Rows, withTrace(multi, x.Trace, []string{ID(uint64(x.PID)), Count(x.Connections), Count(x.Send.Calls), Count(x.Send.Bytes),
			Count(x.Send.Frames), Count(x.Recv.Calls), Count(x.Recv.Bytes), Count(x.Recv.Frames), Count(x.RoundTrips), Num(x.BlockedS)}))
	}
	return []Section{p}
}

// commandsSection lays out commands: per protocol command its count, rate, bytes and RTT
// percentiles, at most maxCommandRows.
func commandsSection(s *analyzers.Summary) []Section {
	if len(s.Commands) == 0 {
		return nil
	}
	c := Section{Title: "Commands", Header: []string{"protocol", "command", "dir", "kind", "count", "rate /s", "bytes", "mean bytes",
		"RTT p50 µs", "p50 95% CI", "p90", "p99", "p99.9", "max"}}
	var restN, restB uint64
	for i, x := range s.Commands {
		if i >= maxCommandRows {
			restN += x.Count
			restB += x.Bytes
			continue
		}
		span := s.Duration
		if x.SpanS > 0 {
			span = x.SpanS // in some of several traces only
		}
		row := []string{x.Protocol, x.Name, x.Direction, x.Kind, Count(x.Count), rate(x.Count, span), Count(x.Bytes), mean(x.Bytes, x.Count)}
		if l := x.RTTUS; l != nil {
			row = append(row, Num(l.P50), ci(*l), Num(l.P90), Num(l.P99), Num(l.P999), Num(l.Max))
		} else {
			row = append(row, "", "", "", "", "", "")
		}
		c.Rows = append(c.Rows, row)
	}
	if restN > 0 {
		c.Rows = append(c.Rows, []string{"", fmt.Sprintf("(%d more)", len(s.Commands)-maxCommandRows), "", "", Count(restN), rate(restN, s.Duration), Count(restB), mean(restB, restN), "", "", "", "", "", ""})
	}
	c.Notes = append(c.Notes, "RTT on a reply a client received; on a reply a server sent, the server's service time")
	return []Section{c}
}

// statusesSection lays out reply statuses: the count and share of each status code.
func statusesSection(s *analyzers.Summary) []Section {
	if len(s.Statuses) == 0 {
		return nil
	}
	st := Section{Title: "Reply statuses", Header: []string{"protocol", "status", "count", "share"}}
	var total uint64
	for _, x := range s.Statuses {
		total += x.Count
	}
	for _, x := range s.Statuses {
		st.Rows = append(st.Rows, []string{x.Protocol, strconv.Itoa(x.Code), Count(x.Count), Share(float64(x.Count) / float64(total))})
	}
	return []Section{st}
}

// roundTripsSection lays out round trips: the client RTT and time to first byte, the server
// service time, with percentiles.
func roundTripsSection(s *analyzers.Summary) []Section {
	rt := s.RoundTrips
	if rt.Count == 0 && rt.Unanswered == 0 && rt.Unpaired == 0 {
		return nil
	}
	r := Section{Title: "Round trips", Header: []string{"population", "count", "p50 µs", "p50 95% CI", "p90", "p99", "p99.9", "max", "mean", "blocked s", "unanswered", "unpaired replies"}}
	if rt.Client > 0 || rt.Served == 0 {
		l := rt.RTTUS
		r.Rows = append(r.Rows, []string{"client RTT", Count(rt.Client), Num(l.P50), ci(l), Num(l.P90), Num(l.P99), Num(l.P999), Num(l.Max), Num(l.Mean), Num(rt.BlockedS), Count(rt.Unanswered), Count(rt.Unpaired)})
		if f := rt.FirstByteUS; f != nil {
			r.Rows = append(r.Rows, []string{"client time to first reply byte", Count(f.N), Num(f.P50), ci(*f), Num(f.P90), Num(f.P99), Num(f.P999), Num(f.Max), Num(f.Mean), "", "", ""})
		}
	}
	if l := rt.ServiceUS; l != nil {
		r.Rows = append(r.Rows, []string{"server service", Count(rt.Served), Num(l.P50), ci(*l), Num(l.P90), Num(l.P99), Num(l.P999), Num(l.Max), Num(l.Mean), "", Count(rt.Unanswered), Count(rt.Unpaired)})
		if m := rt.ServiceToLastUS; m != nil {
			r.Rows = append(r.Rows, []string{"server service to last byte", Count(rt.Served), Num(m.P50), ci(*m), Num(m.P90), Num(m.P99), Num(m.P999), Num(m.Max), Num(m.Mean), "", "", ""})
		}
	}
	r.Notes = append(r.Notes, "client RTT: request's first byte out → reply's last byte in; server service: request's last byte in → reply's first (or last) byte out")
	return []Section{r}
}

// unitsSection lays out per unit of work: requests, replies, round trips, bytes and time per unit,
// and the speedup bound.
func unitsSection(s *analyzers.Summary) []Section {
	if len(s.Units) == 0 {
		return nil
	}
	u := Section{Title: "Per unit of work", Header: []string{"unit", "shape", "count", "requests", "replies", "round trips", "bytes sent", "bytes recv", "time µs", "network wait µs", "server time µs", "units/s", "max speedup"}}
	multi := len(s.Traces) > 1
	if multi {
		u.Header = append([]string{"trace"}, u.Header...)
	}
	for _, x := range s.Units {
		row := []string{x.Name, orDash(x.Shape), Count(x.Count), Num(x.RequestsPerUnit), Num(x.RepliesPerUnit), Num(x.RoundTripsPerUnit), Num(x.BytesSentPerUnit), Num(x.BytesRecvPerUnit),
			Num(x.UnitTimeUS), waitCell(x), serverCell(x), Num(x.UnitsPerS), speedup(x.MaxSpeedup)}
		if multi {
			row = append([]string{orDash(x.Trace)}, row...)
		}
		u.Rows = append(u.Rows, row)
	}
	for _, x := range s.Units {
		if x.Sequence != "" {
			u.Notes = append(u.Notes, fmt.Sprintf("%s%s: %s", tracePrefix(multi, x.Trace), x.Shape, x.Sequence))
		}
	}
	u.Notes = append(u.Notes, "requests: client to server; replies: server to client; counts and averages over the same units")
	u.Notes = append(u.Notes, "max speedup = unit time / (unit time - network wait): the bound from removing every round trip, assuming every µs of waiting is removable; server time (a server's trace) is the part of the unit the server was not waiting to read")
	return []Section{u}
}

// unitShapesSection lays out units by command sequence: the units grouped by the calls they make.
func unitShapesSection(s *analyzers.Summary) []Section {
	if len(s.UnitShapes) == 0 {
		return nil
	}
	u := Section{Title: "Units by command sequence", Header: []string{"unit", "shape", "count", "requests", "replies", "round trips", "bytes sent", "bytes recv", "time µs", "sequence"}}
	multi := len(s.Traces) > 1
	if multi {
		u.Header = append([]string{"trace"}, u.Header...)
	}
	for _, x := range s.UnitShapes {
		row := []string{x.Name, x.Shape, Count(x.Count), Num(x.RequestsPerUnit), Num(x.RepliesPerUnit), Num(x.RoundTripsPerUnit), Num(x.BytesSentPerUnit), Num(x.BytesRecvPerUnit), Num(x.UnitTimeUS), x.Sequence}
		if multi {
			row = append([]string{orDash(x.Trace)}, row...)
		}
		u.Rows = append(u.Rows, row)
	}
	return []Section{u}
}

// phasesSection lays out phases: each phase's start, duration, messages and bytes.
func phasesSection(s *analyzers.Summary) []Section {
	if len(s.Phases) == 0 {
		return nil
	}
	p := Section{Title: "Phases", Header: []string{"phase", "start s", "duration s", "messages", "bytes"}}
	multi := len(s.Traces) > 1
	if multi {
		p.Header = append([]string{"trace"}, p.Header...)
	}
	for _, x := range s.Phases {
		p.Rows = append(p.Rows, withTrace(multi, x.Trace, []string{x.Name, Num(x.StartS), Num(x.DurationS), Count(x.Messages), Count(x.Bytes)}))
	}
	return []Section{p}
}

// littleSection lays out in flight and Little's law: L = λ·W checked per group.
func littleSection(s *analyzers.Summary) []Section {
	if s.InFlight == nil && len(s.LittlesLaw) == 0 {
		return nil
	}
	l := Section{Title: "In flight and Little's law (L = λ·W)", Header: []string{"group", "L in flight", "λ per s", "W predicted µs (L/λ)", "W measured µs (mean)", "error", "median µs"}}
	for _, x := range s.LittlesLaw {
		l.Rows = append(l.Rows, []string{x.Label, Num(x.InFlight), Num(x.ThroughputPerS), Num(x.RTTPredictedUS), Num(x.RTTMeasuredUS), Change(x.Error), Num(x.RTTMedianUS)})
	}
	l.Notes = append(l.Notes, "W measured is the mean response time, as the law has it; the median is shown apart")
	if s.InFlight != nil {
		peak := fmt.Sprintf("at most %d", s.InFlight.Max)
		if s.InFlight.MaxAtLeast {
			peak = fmt.Sprintf("%d or more", s.InFlight.Max)
		}
		l.Notes = append(l.Notes, fmt.Sprintf("requests in flight: mean %s over all processes, %s at once in one process", Num(s.InFlight.Mean), peak))
	}
	return []Section{l}
}

// batchSection lays out batch model: the fit of T = T_fixed + T_per_req·N, its residuals and
// marginal costs.
func batchSection(s *analyzers.Summary) []Section {
	f := s.BatchFit
	if f == nil {
		return nil
	}
	b := Section{Title: "Batch model T = T_fixed + T_per_req·N", Header: []string{"T_fixed µs", "95% CI", "T_per_req µs", "95% CI", "R²", "points", "max throughput /s"}}
	b.Rows = append(b.Rows, []string{Num(f.TFixedUS), Interval(f.TFixedCI[0], f.TFixedCI[1]), Num(f.TPerReqUS), Interval(f.TPerReqCI[0], f.TPerReqCI[1]), Num(f.R2), Count(f.Points), Num(f.ThroughputMax)})
	if len(f.Residuals) > 0 {
		var rs []string
		for _, r := range f.Residuals {
			rs = append(rs, Num(r))
		}
		b.Notes = append(b.Notes, "residuals µs: "+strings.Join(rs, ", "))
	}
	if len(s.BatchRefinement) > 0 {
		var rs []string
		for _, r := range s.BatchRefinement {
			rs = append(rs, fmt.Sprintf("N %s→%s: %s µs", Num(r.NFrom), Num(r.N), Num(r.TPerReqUS)))
		}
		b.Notes = append(b.Notes, "load-dependent T_per_req (marginal ΔT/ΔN): "+strings.Join(rs, ", "))
	}
	return []Section{b}
}

// modesSection lays out latency populations: the modes of the client RTT or the server service
// time.
func modesSection(s *analyzers.Summary) []Section {
	if len(s.Modes) == 0 {
		return nil
	}
	title := "Latency populations (client round-trip time)"
	if s.ModesOf == "service" {
		title = "Latency populations (server service time)"
	}
	m := Section{Title: title, Header: []string{"population", "centre µs", "share", "range µs"}}
	for i, x := range s.Modes {
		m.Rows = append(m.Rows, []string{strconv.Itoa(i + 1), Num(x.CenterUS), Share(x.Share), Interval(x.LowUS, x.HighUS)})
	}
	return []Section{m}
}

// windowsSection lays out per-100-message summaries in Venus Plus's VENUS_TRACE_NET format.
func windowsSection(s *analyzers.Summary) []Section {
	if len(s.Windows) == 0 {
		return nil
	}
	w := Section{Title: "Per-100-message summaries (Venus Plus VENUS_TRACE_NET format)", Header: []string{"dir", "command", "summary at messages", "avg_us", "avg_bytes", "max_us"}}
	var shown, rtts []analyzers.Window
	for _, x := range s.Windows {
		if x.Dir == "rtt" {
			rtts = append(rtts, x)
		} else {
			shown = append(shown, x) // every window of each direction (at most 64 each)
		}
	}
	shown = append(shown, lastWindows(rtts, 3, 8)...)
	for _, x := range shown {
		ab := Num(x.AvgBytes)
		if x.Dir == "rtt" {
			ab = ""
		}
		w.Rows = append(w.Rows, []string{x.Dir, orDash(x.Command), Count(x.Calls), Num(x.AvgUS), ab, Num(x.MaxUS)})
	}
	w.Notes = append(w.Notes, "cumulative at that many messages per direction (a received message is its header and payload reads); rtt rows: the round trips of one command")
	if left := len(s.Windows) - len(shown); left > 0 {
		w.Notes = append(w.Notes, fmt.Sprintf("%d more rtt windows (earlier ones, and commands past the first 8) in --format json", left))
	}
	return []Section{w}
}

// errorsSection lays out failed calls: per errno and direction, the count.
func errorsSection(s *analyzers.Summary) []Section {
	if len(s.Errors) == 0 {
		return nil
	}
	e := Section{Title: "Failed calls", Header: []string{"errno", "name", "dir", "count"}}
	for _, x := range s.Errors {
		e.Rows = append(e.Rows, []string{ID(uint64(x.Errno)), x.Name, x.Dir, Count(x.Count)})
	}
	return []Section{e}
}

// answer says in a few sentences what the numbers below mean.
func answer(s *analyzers.Summary) []string {
	var out []string
	split := "trace the server to split it"
	for _, u := range s.Units {
		if u.Side == "server" {
			// a server's trace is here, analysed apart: only merged, from the same run, does it split
			split = "the server's trace from the same run, merged with this one by perflab merge, splits it"
		}
	}
	for _, u := range s.Units {
		what := u.Name
		if u.Shape == "steady" {
			what = fmt.Sprintf("%s (steady state, %d %ss)", u.Name, u.Count, u.Name)
		}
		line := fmt.Sprintf("%s%s: %s, %s and %s per %s", tracePrefix(len(s.Traces) > 1, u.Trace), what,
			Amount(u.RequestsPerUnit, "request", "requests"), Amount(u.RepliesPerUnit, "reply", "replies"),
			Amount(u.RoundTripsPerUnit, "round trip", "round trips"), u.Name)
		switch {
		case u.Side == "server" && u.UnitTimeUS > 0:
			line += fmt.Sprintf("; of its %s µs, the server worked %s µs and waited %s µs for the client and the network",
				Num(u.UnitTimeUS), Num(u.ServerTimeUS), Num(u.NotServerUS))
		case u.UnitTimeUS > 0 && u.NetWaitUS > 0 && u.ServerTimeUS > 0:
			line += fmt.Sprintf("; %s of its %s µs spent waiting on replies, of which the server worked %s µs and the network and the rest took %s µs; removing every round trip could make it up to %s× faster",
				Num(u.NetWaitUS), Num(u.UnitTimeUS), Num(u.ServerTimeUS), Num(u.NotServerUS), Num(u.MaxSpeedup))
		case u.UnitTimeUS > 0 && u.NetWaitUS > 0:
			line += fmt.Sprintf("; %s of its %s µs spent waiting on replies (server time included: %s), so removing round trips could make it up to %s× faster",
				Num(u.NetWaitUS), Num(u.UnitTimeUS), split, Num(u.MaxSpeedup))
		}
		out = append(out, line+".")
	}
	blindMissed := s.CountsLowerBound() && s.CallsPastHead == 0
	atLeast := ""
	if s.CountsLowerBound() {
		atLeast = "at least "
	}
	if rt := s.RoundTrips; rt.Client > 0 || rt.Count > 0 && rt.Served == 0 {
		line := fmt.Sprintf("%s%d round trips: median %s µs, p99 %s µs", atLeast, rt.Client, Num(rt.RTTUS.P50), Num(rt.RTTUS.P99))
		switch {
		case s.InFlight != nil && atLeast != "":
			line += fmt.Sprintf(", at least %s requests in flight on average (at the peak, %d or more at once in one process)", Num(s.InFlight.Mean), s.InFlight.Max)
		case s.InFlight != nil && s.InFlight.MaxAtLeast:
			line += fmt.Sprintf(", %s requests in flight on average (at the peak, %d or more at once in one process)", Num(s.InFlight.Mean), s.InFlight.Max)
		case s.InFlight != nil:
			line += fmt.Sprintf(", %s requests in flight on average (at most %d at once in one process)", Num(s.InFlight.Mean), s.InFlight.Max)
		}
		out = append(out, line+".")
	}
	switch {
	case s.CallsPastHead > 0:
		out = append(out, fmt.Sprintf("Counts are lower bounds: in %s calls the captured payload heads ended before the pipelined messages did, and the messages past them are not counted (see the warnings; %s).",
			Count(s.CallsPastHead), analyzers.HeadAdvice(s.Meta, "see more of each call")))
	case blindMissed:
		out = append(out, fmt.Sprintf("Counts are lower bounds: in %s calls a message's lines ran past the captured payload head, and %s replies answer no request seen: requests pipelined after it in the same call were not counted (%s).",
			Count(s.CallsBlind), Count(s.RoundTrips.Unpaired), analyzers.HeadAdvice(s.Meta, "see more of each call")))
	case s.CallsBlind > 0:
		out = append(out, fmt.Sprintf("In %s calls a message's lines ran past the captured payload head: each was taken to end with its call, so a message pipelined after it in the same call would not be counted (%s).",
			Count(s.CallsBlind), analyzers.HeadAdvice(s.Meta, "see more of each call")))
	}
	if n := pushesReceived(s); n > 0 {
		line := fmt.Sprintf("%s messages pushed by the server of its own accord (pub/sub, MONITOR), which answer no request and are not round trips", Count(n))
		if s.PushesPastHead > 0 {
			line = fmt.Sprintf("%s messages pushed by the server of its own accord (pub/sub, MONITOR) decoded, and more not seen (in %s calls the captured payload heads ended before the messages did; %s); they answer no request and are not round trips",
				Count(n), Count(s.PushesPastHead), analyzers.HeadAdvice(s.Meta, "see more of each call"))
		}
		out = append(out, line+".")
	}
	if rt := s.RoundTrips; rt.Served > 0 && rt.ServiceUS != nil {
		out = append(out, fmt.Sprintf("%d round trips served: service time (request's last byte in → reply's first byte out) median %s µs, p99 %s µs.",
			rt.Served, Num(rt.ServiceUS.P50), Num(rt.ServiceUS.P99)))
	}
	if len(s.Modes) > 1 {
		of := "round-trip time"
		if s.ModesOf == "service" {
			of = "service time"
		}
		var parts []string
		for _, m := range s.Modes {
			parts = append(parts, fmt.Sprintf("%s around %s µs", Share(m.Share), Num(m.CenterUS)))
		}
		out = append(out, fmt.Sprintf("%d populations of %s: %s.", len(s.Modes), of, strings.Join(parts, ", ")))
	}
	if f := s.BatchFit; f != nil && f.Points >= 3 && f.TPerReqUS > 0 && f.R2 >= 0.8 {
		out = append(out, fmt.Sprintf("batch model: %s µs per cycle plus %s µs per request (R² %s).", Num(f.TFixedUS), Num(f.TPerReqUS), Num(f.R2)))
	}
	return append(out, evidenceInShort(s)...)
}

// lastWindows keeps the last k windows of each direction and command, for the first groups
// groups.
func lastWindows(ws []analyzers.Window, k, groups int) []analyzers.Window {
	byDir := map[string][]analyzers.Window{}
	var order []string
	for _, w := range ws {
		key := w.Dir + "\x00" + w.Command
		if _, ok := byDir[key]; !ok {
			if len(order) == groups {
				continue
			}
			order = append(order, key)
		}
		byDir[key] = append(byDir[key], w)
	}
	var out []analyzers.Window
	for _, d := range order {
		l := byDir[d]
		if len(l) > k {
			l = l[len(l)-k:]
		}
		out = append(out, l...)
	}
	return out
}

// Table writes the Summary as plain-text tables for a terminal, warnings last.
func Table(w io.Writer, s *analyzers.Summary) error {
	return writeText(w, sections(s), s.Warnings)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ci(l analyzers.Latency) string {
	if l.P50Low == 0 && l.P50High == 0 {
		return "n/a"
	}
	return Interval(l.P50Low, l.P50High)
}

func rate(n uint64, durS float64) string {
	if durS <= 0 {
		return "-"
	}
	return Num(float64(n) / durS)
}

func mean(total, n uint64) string {
	if n == 0 {
		return "-"
	}
	return Num(float64(total) / float64(n))
}

// withTrace puts the trace's name first in a per-trace row when several traces are analysed.
func withTrace(multi bool, t string, row []string) []string {
	if !multi {
		return row
	}
	return append([]string{orDash(t)}, row...)
}

func tracePrefix(multi bool, t string) string {
	if !multi || t == "" {
		return ""
	}
	return t + ": "
}

// waitCell is a unit's network wait: blank on a server's trace, where the client's wait is
// not seen.
func waitCell(u analyzers.UnitStats) string {
	if u.Side == "server" {
		return "-"
	}
	return Num(u.NetWaitUS)
}

// serverCell is a unit's server time: known on a server's trace, or when the server is traced
// in the same trace as its client.
func serverCell(u analyzers.UnitStats) string {
	if u.Side != "server" && u.ServerTimeUS == 0 {
		return "-"
	}
	return Num(u.ServerTimeUS)
}

func speedup(v float64) string {
	if v == 0 {
		return "-"
	}
	return Num(v) + "×"
}

// decodingText says how much of the data the decoders explained, and (auto) which protocol
// was chosen on how many connections: "99.2% of 3600 bytes (auto: http on 2 connections, 99.2%)".
func decodingText(d *analyzers.Decoding) string {
	var parts []string
	for _, p := range d.Protocols {
		conns := "connections"
		if p.Connections == 1 {
			conns = "connection"
		}
		parts = append(parts, fmt.Sprintf("%s on %d %s, %s", p.Name, p.Connections, conns, Share(p.Share)))
	}
	return fmt.Sprintf("%s of %s bytes (%s: %s)", Share(d.Share), Count(d.Bytes), d.Mode, strings.Join(parts, "; "))
}

// pushesReceived counts the pushes (pub/sub messages, MONITOR lines) the recorded clients received.
func pushesReceived(s *analyzers.Summary) uint64 {
	var n uint64
	for _, c := range s.Commands {
		if c.Kind == "push" && c.Direction == "recv" {
			n += c.Count
		}
	}
	return n
}
