package reports

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/perflab/perflab/analyzers"
)

// section is one titled table of an analyze report, shared by the table and markdown formats so
// that both show the same numbers.
type section struct {
	title  string
	header []string
	rows   [][]string
	notes  []string // lines printed under the table
}

// maxConnRows bounds the connections listed by the table and markdown reports, as
// htmlMaxConns does for HTML.
const maxConnRows = htmlMaxConns

// maxCommandRows bounds the commands listed; the rest are summed in one row.
const maxCommandRows = 30

// sections lays a Summary out as report sections.
func sections(s *analyzers.Summary) []section {
	var out []section
	if a := answer(s); len(a) > 0 {
		out = append(out, section{title: "In short", notes: a})
	}
	ov := section{title: "Overview", header: []string{"what", "value"}}
	ov.rows = append(ov.rows,
		[]string{"traces", strings.Join(s.Traces, ", ")},
		[]string{"protocol", orDash(s.Protocol)},
		[]string{"events", u64(s.Events)},
		[]string{"lost events", u64(s.Lost)},
		[]string{"duration", fmt.Sprintf("%s s", tnum(s.Duration))},
		[]string{"send", fmt.Sprintf("%s calls, %s bytes, %s frames", u64(s.Totals.Send.Calls), u64(s.Totals.Send.Bytes), u64(s.Totals.Send.Frames))},
		[]string{"recv", fmt.Sprintf("%s calls, %s bytes, %s frames", u64(s.Totals.Recv.Calls), u64(s.Totals.Recv.Bytes), u64(s.Totals.Recv.Frames))},
	)
	if d := s.Decoding; d != nil {
		row := []string{"decoded", decodingText(d)}
		ov.rows = append(ov.rows[:2], append([][]string{row}, ov.rows[2:]...)...)
	}
	if s.Recovery != nil {
		ov.rows = append(ov.rows, []string{"recovery", s.Recovery.String()})
	}
	if b := s.Batches; b != nil {
		ov.rows = append(ov.rows, []string{"batched commands", fmt.Sprintf("%s commands in %s request frames (%s of several, at most %d in one); %s batched, not split",
			u64(b.Commands), u64(b.Frames), u64(b.MultiCommand), b.MaxPerFrame, u64(b.NotSplit))})
	}
	out = append(out, ov)

	if len(s.Connections) > 0 {
		c := section{title: "Connections (latency columns: system-call durations)", header: []string{"id", "family", "local", "remote", "pid",
			"send calls", "send bytes", "send call p50 µs", "send call p99 µs", "recv calls", "recv bytes", "recv call p50 µs", "recv call p99 µs"}}
		multi := len(s.Traces) > 1
		if multi {
			c.header = append([]string{"trace"}, c.header...)
		}
		conns := s.Connections
		if len(conns) > maxConnRows {
			// A server with many clients: a table of every connection is no report (and costs
			// seconds to lay out); the JSON lists them all.
			c.notes = append(c.notes, fmt.Sprintf("%d more connections not shown (the first %d in the trace are); --format json lists them all", len(conns)-maxConnRows, maxConnRows))
			conns = conns[:maxConnRows]
		}
		for _, x := range conns {
			c.rows = append(c.rows, withTrace(multi, x.Trace, []string{u64(x.ID), x.Family, orDash(x.Local), orDash(x.Remote), u64(uint64(x.PID)),
				u64(x.Send.Calls), u64(x.Send.Bytes), tnum(x.Send.LatencyUS.P50), tnum(x.Send.LatencyUS.P99),
				u64(x.Recv.Calls), u64(x.Recv.Bytes), tnum(x.Recv.LatencyUS.P50), tnum(x.Recv.LatencyUS.P99)}))
		}
		out = append(out, c)
	}

	if len(s.Processes) > 0 {
		p := section{title: "Processes", header: []string{"pid", "connections", "send calls", "send bytes", "send frames",
			"recv calls", "recv bytes", "recv frames", "round trips", "blocked s"}}
		multi := len(s.Traces) > 1
		if multi {
			p.header = append([]string{"trace"}, p.header...)
		}
		for _, x := range s.Processes {
			p.rows = append(p.rows, withTrace(multi, x.Trace, []string{u64(uint64(x.PID)), strconv.Itoa(x.Connections), u64(x.Send.Calls), u64(x.Send.Bytes),
				u64(x.Send.Frames), u64(x.Recv.Calls), u64(x.Recv.Bytes), u64(x.Recv.Frames), u64(x.RoundTrips), tnum(x.BlockedS)}))
		}
		out = append(out, p)
	}

	if len(s.Commands) > 0 {
		c := section{title: "Commands", header: []string{"protocol", "command", "dir", "kind", "count", "rate /s", "bytes", "mean bytes",
			"RTT p50 µs", "p50 95% CI", "p90", "p99", "p99.9", "max"}}
		var restN, restB uint64
		for i, x := range s.Commands {
			if i >= maxCommandRows {
				restN += x.Count
				restB += x.Bytes
				continue
			}
			row := []string{x.Protocol, x.Name, x.Direction, x.Kind, u64(x.Count), rate(x.Count, s.Duration), u64(x.Bytes), mean(x.Bytes, x.Count)}
			if l := x.RTTUS; l != nil {
				row = append(row, tnum(l.P50), ci(*l), tnum(l.P90), tnum(l.P99), tnum(l.P999), tnum(l.Max))
			} else {
				row = append(row, "", "", "", "", "", "")
			}
			c.rows = append(c.rows, row)
		}
		if restN > 0 {
			c.rows = append(c.rows, []string{"", fmt.Sprintf("(%d more)", len(s.Commands)-maxCommandRows), "", "", u64(restN), rate(restN, s.Duration), u64(restB), mean(restB, restN), "", "", "", "", "", ""})
		}
		c.notes = append(c.notes, "RTT on a reply a client received; on a reply a server sent, the server's service time")
		out = append(out, c)
	}

	if len(s.Statuses) > 0 {
		st := section{title: "Reply statuses", header: []string{"protocol", "status", "count", "share"}}
		var total uint64
		for _, x := range s.Statuses {
			total += x.Count
		}
		for _, x := range s.Statuses {
			st.rows = append(st.rows, []string{x.Protocol, strconv.Itoa(x.Code), u64(x.Count), pct(float64(x.Count) / float64(total))})
		}
		out = append(out, st)
	}

	rt := s.RoundTrips
	if rt.Count > 0 || rt.Unanswered > 0 || rt.Unpaired > 0 {
		r := section{title: "Round trips", header: []string{"population", "count", "p50 µs", "p50 95% CI", "p90", "p99", "p99.9", "max", "mean", "blocked s", "unanswered", "unpaired replies"}}
		if rt.Client > 0 || rt.Served == 0 {
			l := rt.RTTUS
			r.rows = append(r.rows, []string{"client RTT", u64(rt.Client), tnum(l.P50), ci(l), tnum(l.P90), tnum(l.P99), tnum(l.P999), tnum(l.Max), tnum(l.Mean), tnum(rt.BlockedS), u64(rt.Unanswered), u64(rt.Unpaired)})
			if f := rt.FirstByteUS; f != nil {
				r.rows = append(r.rows, []string{"client time to first reply byte", u64(f.N), tnum(f.P50), ci(*f), tnum(f.P90), tnum(f.P99), tnum(f.P999), tnum(f.Max), tnum(f.Mean), "", "", ""})
			}
		}
		if l := rt.ServiceUS; l != nil {
			r.rows = append(r.rows, []string{"server service", u64(rt.Served), tnum(l.P50), ci(*l), tnum(l.P90), tnum(l.P99), tnum(l.P999), tnum(l.Max), tnum(l.Mean), "", u64(rt.Unanswered), u64(rt.Unpaired)})
			if m := rt.ServiceToLastUS; m != nil {
				r.rows = append(r.rows, []string{"server service to last byte", u64(rt.Served), tnum(m.P50), ci(*m), tnum(m.P90), tnum(m.P99), tnum(m.P999), tnum(m.Max), tnum(m.Mean), "", "", ""})
			}
		}
		r.notes = append(r.notes, "client RTT: request's first byte out → reply's last byte in; server service: request's last byte in → reply's first (or last) byte out")
		out = append(out, r)
	}

	if len(s.Units) > 0 {
		u := section{title: "Per unit of work", header: []string{"unit", "shape", "count", "requests", "replies", "round trips", "bytes sent", "bytes recv", "time µs", "network wait µs", "server time µs", "units/s", "max speedup"}}
		multi := len(s.Traces) > 1
		if multi {
			u.header = append([]string{"trace"}, u.header...)
		}
		for _, x := range s.Units {
			row := []string{x.Name, orDash(x.Shape), u64(x.Count), tnum(x.RequestsPerUnit), tnum(x.RepliesPerUnit), tnum(x.RoundTripsPerUnit), tnum(x.BytesSentPerUnit), tnum(x.BytesRecvPerUnit),
				tnum(x.UnitTimeUS), waitCell(x), serverCell(x), tnum(x.UnitsPerS), speedup(x.MaxSpeedup)}
			if multi {
				row = append([]string{orDash(x.Trace)}, row...)
			}
			u.rows = append(u.rows, row)
		}
		for _, x := range s.Units {
			if x.Sequence != "" {
				u.notes = append(u.notes, fmt.Sprintf("%s%s: %s", tracePrefix(multi, x.Trace), x.Shape, x.Sequence))
			}
		}
		u.notes = append(u.notes, "requests: client to server; replies: server to client; counts and averages over the same units")
		u.notes = append(u.notes, "max speedup = unit time / (unit time - network wait): the bound from removing every round trip, assuming every µs of waiting is removable; server time (a server's trace) is the part of the unit the server was not waiting to read")
		out = append(out, u)
	}

	if len(s.UnitShapes) > 0 {
		u := section{title: "Units by command sequence", header: []string{"unit", "shape", "count", "requests", "replies", "round trips", "bytes sent", "bytes recv", "time µs", "sequence"}}
		multi := len(s.Traces) > 1
		if multi {
			u.header = append([]string{"trace"}, u.header...)
		}
		for _, x := range s.UnitShapes {
			row := []string{x.Name, x.Shape, u64(x.Count), tnum(x.RequestsPerUnit), tnum(x.RepliesPerUnit), tnum(x.RoundTripsPerUnit), tnum(x.BytesSentPerUnit), tnum(x.BytesRecvPerUnit), tnum(x.UnitTimeUS), x.Sequence}
			if multi {
				row = append([]string{orDash(x.Trace)}, row...)
			}
			u.rows = append(u.rows, row)
		}
		out = append(out, u)
	}

	if len(s.Phases) > 0 {
		p := section{title: "Phases", header: []string{"phase", "start s", "duration s", "messages", "bytes"}}
		multi := len(s.Traces) > 1
		if multi {
			p.header = append([]string{"trace"}, p.header...)
		}
		for _, x := range s.Phases {
			p.rows = append(p.rows, withTrace(multi, x.Trace, []string{x.Name, tnum(x.StartS), tnum(x.DurationS), u64(x.Messages), u64(x.Bytes)}))
		}
		out = append(out, p)
	}

	if s.InFlight != nil || len(s.LittlesLaw) > 0 {
		l := section{title: "In flight and Little's law (L = λ·W)", header: []string{"group", "L in flight", "λ per s", "W predicted µs (L/λ)", "W measured µs (mean)", "error", "median µs"}}
		for _, x := range s.LittlesLaw {
			l.rows = append(l.rows, []string{x.Label, tnum(x.InFlight), tnum(x.ThroughputPerS), tnum(x.RTTPredictedUS), tnum(x.RTTMeasuredUS), pct(x.Error), tnum(x.RTTMedianUS)})
		}
		l.notes = append(l.notes, "W measured is the mean response time, as the law has it; the median is shown apart")
		if s.InFlight != nil {
			l.notes = append(l.notes, fmt.Sprintf("requests in flight: mean %s over all processes, at most %d at once in one process", tnum(s.InFlight.Mean), s.InFlight.Max))
		}
		out = append(out, l)
	}

	if f := s.BatchFit; f != nil {
		b := section{title: "Batch model T = T_fixed + T_per_req·N", header: []string{"T_fixed µs", "95% CI", "T_per_req µs", "95% CI", "R²", "points", "max throughput /s"}}
		b.rows = append(b.rows, []string{tnum(f.TFixedUS), interval(f.TFixedCI), tnum(f.TPerReqUS), interval(f.TPerReqCI), tnum(f.R2), strconv.Itoa(f.Points), tnum(f.ThroughputMax)})
		if len(f.Residuals) > 0 {
			var rs []string
			for _, r := range f.Residuals {
				rs = append(rs, tnum(r))
			}
			b.notes = append(b.notes, "residuals µs: "+strings.Join(rs, ", "))
		}
		if len(s.BatchRefinement) > 0 {
			var rs []string
			for _, r := range s.BatchRefinement {
				rs = append(rs, fmt.Sprintf("N %s→%s: %s µs", tnum(r.NFrom), tnum(r.N), tnum(r.TPerReqUS)))
			}
			b.notes = append(b.notes, "load-dependent T_per_req (marginal ΔT/ΔN): "+strings.Join(rs, ", "))
		}
		out = append(out, b)
	}

	if len(s.Modes) > 0 {
		title := "Latency populations (client round-trip time)"
		if s.ModesOf == "service" {
			title = "Latency populations (server service time)"
		}
		m := section{title: title, header: []string{"population", "centre µs", "share", "range µs"}}
		for i, x := range s.Modes {
			m.rows = append(m.rows, []string{strconv.Itoa(i + 1), tnum(x.CenterUS), pct(x.Share), tnum(x.LowUS) + " – " + tnum(x.HighUS)})
		}
		out = append(out, m)
	}

	if len(s.Windows) > 0 {
		w := section{title: "Per-100-message summaries (Venus Plus VENUS_TRACE_NET format)", header: []string{"dir", "command", "summary at messages", "avg_us", "avg_bytes", "max_us"}}
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
			ab := tnum(x.AvgBytes)
			if x.Dir == "rtt" {
				ab = ""
			}
			w.rows = append(w.rows, []string{x.Dir, orDash(x.Command), u64(x.Calls), tnum(x.AvgUS), ab, tnum(x.MaxUS)})
		}
		w.notes = append(w.notes, "cumulative at that many messages per direction (a received message is its header and payload reads); rtt rows: the round trips of one command")
		if left := len(s.Windows) - len(shown); left > 0 {
			w.notes = append(w.notes, fmt.Sprintf("%d more rtt windows (earlier ones, and commands past the first 8) in --format json", left))
		}
		out = append(out, w)
	}

	out = append(out, loopSections(s.Loops)...)
	if len(s.Errors) > 0 {
		e := section{title: "Failed calls", header: []string{"errno", "name", "dir", "count"}}
		for _, x := range s.Errors {
			e.rows = append(e.rows, []string{u64(uint64(x.Errno)), x.Name, x.Dir, u64(x.Count)})
		}
		out = append(out, e)
	}
	return out
}

// answer says in a few sentences what the numbers below mean.
func answer(s *analyzers.Summary) []string {
	var out []string
	for _, u := range s.Units {
		what := u.Name
		if u.Shape == "steady" {
			what = fmt.Sprintf("%s (steady state, %d %ss)", u.Name, u.Count, u.Name)
		}
		line := fmt.Sprintf("%s%s: %s requests, %s replies and %s round trips per %s", tracePrefix(len(s.Traces) > 1, u.Trace), what,
			tnum(u.RequestsPerUnit), tnum(u.RepliesPerUnit), tnum(u.RoundTripsPerUnit), u.Name)
		switch {
		case u.Side == "server" && u.UnitTimeUS > 0:
			line += fmt.Sprintf("; of its %s µs, the server worked %s µs and waited %s µs for the client and the network",
				tnum(u.UnitTimeUS), tnum(u.ServerTimeUS), tnum(u.NotServerUS))
		case u.UnitTimeUS > 0 && u.NetWaitUS > 0 && u.ServerTimeUS > 0:
			line += fmt.Sprintf("; %s of its %s µs spent waiting on replies, of which the server worked %s µs and the network and the rest took %s µs; removing every round trip could make it up to %s× faster",
				tnum(u.NetWaitUS), tnum(u.UnitTimeUS), tnum(u.ServerTimeUS), tnum(u.NotServerUS), tnum(u.MaxSpeedup))
		case u.UnitTimeUS > 0 && u.NetWaitUS > 0:
			line += fmt.Sprintf("; %s of its %s µs spent waiting on replies (server time included: trace the server to split it), so removing round trips could make it up to %s× faster",
				tnum(u.NetWaitUS), tnum(u.UnitTimeUS), tnum(u.MaxSpeedup))
		}
		out = append(out, line+".")
	}
	if rt := s.RoundTrips; rt.Client > 0 || rt.Count > 0 && rt.Served == 0 {
		line := fmt.Sprintf("%d round trips: median %s µs, p99 %s µs", rt.Client, tnum(rt.RTTUS.P50), tnum(rt.RTTUS.P99))
		if s.InFlight != nil {
			line += fmt.Sprintf(", %s requests in flight on average (at most %d at once in one process)", tnum(s.InFlight.Mean), s.InFlight.Max)
		}
		out = append(out, line+".")
	}
	if rt := s.RoundTrips; rt.Served > 0 && rt.ServiceUS != nil {
		out = append(out, fmt.Sprintf("%d round trips served: service time (request's last byte in → reply's first byte out) median %s µs, p99 %s µs.",
			rt.Served, tnum(rt.ServiceUS.P50), tnum(rt.ServiceUS.P99)))
	}
	if len(s.Modes) > 1 {
		of := "round-trip time"
		if s.ModesOf == "service" {
			of = "service time"
		}
		var parts []string
		for _, m := range s.Modes {
			parts = append(parts, fmt.Sprintf("%s around %s µs", pct(m.Share), tnum(m.CenterUS)))
		}
		out = append(out, fmt.Sprintf("%d populations of %s: %s.", len(s.Modes), of, strings.Join(parts, ", ")))
	}
	if f := s.BatchFit; f != nil && f.Points >= 3 && f.TPerReqUS > 0 && f.R2 >= 0.8 {
		out = append(out, fmt.Sprintf("batch model: %s µs per cycle plus %s µs per request (R² %s).", tnum(f.TFixedUS), tnum(f.TPerReqUS), tnum(f.R2)))
	}
	return out
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
	for i, sec := range sections(s) {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(w, "%s\n", sec.title); err != nil {
			return err
		}
		if len(sec.header) == 0 {
			for _, n := range sec.notes {
				if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
					return err
				}
			}
			continue
		}
		t := tablewriter.NewTable(w,
			tablewriter.WithRendition(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)}),
			tablewriter.WithHeaderAutoFormat(tw.Off),
			tablewriter.WithHeaderAlignment(tw.AlignLeft),
			tablewriter.WithRowAlignment(tw.AlignLeft),
			tablewriter.WithRowAutoWrap(tw.WrapNone),
			tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		)
		t.Header(toAny(sec.header)...)
		for _, r := range sec.rows {
			if err := t.Append(toAny(r)...); err != nil {
				return fmt.Errorf("render table %s: %w", sec.title, err)
			}
		}
		if err := t.Render(); err != nil {
			return fmt.Errorf("render table %s: %w", sec.title, err)
		}
		for _, n := range sec.notes {
			if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
				return err
			}
		}
	}
	return writeWarnings(w, s.Warnings, "warning: ")
}

func writeWarnings(w io.Writer, warns []string, prefix string) error {
	if len(warns) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	for _, x := range warns {
		if _, err := fmt.Fprintf(w, "%s%s\n", prefix, x); err != nil {
			return err
		}
	}
	return nil
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func u64(v uint64) string { return strconv.FormatUint(v, 10) }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// num formats a measurement with a precision that suits its size.
func tnum(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "-"
	case v == 0:
		return "0"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

func pct(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }

func ci(l analyzers.Latency) string {
	if l.P50Low == 0 && l.P50High == 0 {
		return "n/a"
	}
	return tnum(l.P50Low) + " – " + tnum(l.P50High)
}

func interval(c [2]float64) string { return tnum(c[0]) + " – " + tnum(c[1]) }

func rate(n uint64, durS float64) string {
	if durS <= 0 {
		return "-"
	}
	return tnum(float64(n) / durS)
}

func mean(total, n uint64) string {
	if n == 0 {
		return "-"
	}
	return tnum(float64(total) / float64(n))
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
	return tnum(u.NetWaitUS)
}

// serverCell is a unit's server time: known on a server's trace, or when the server is traced
// in the same trace as its client.
func serverCell(u analyzers.UnitStats) string {
	if u.Side != "server" && u.ServerTimeUS == 0 {
		return "-"
	}
	return tnum(u.ServerTimeUS)
}

func speedup(v float64) string {
	if v == 0 {
		return "-"
	}
	return tnum(v) + "×"
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
		parts = append(parts, fmt.Sprintf("%s on %d %s, %s", p.Name, p.Connections, conns, pct(p.Share)))
	}
	return fmt.Sprintf("%s of %s bytes (%s: %s)", pct(d.Share), u64(d.Bytes), d.Mode, strings.Join(parts, "; "))
}
