package reports

import (
	"fmt"

	"github.com/perflab/perflab/breakdown"
)

// twoHostsSections lays out the client/network/server split of a merged trace: the hosts and
// their clocks, then the split per round trip, per command and per unit of work.
func twoHostsSections(r *breakdown.Report) []Section {
	if r == nil {
		return nil
	}
	h := Section{Title: "Two hosts", Header: []string{"input", "host", "connections", "clock offset µs [lo, hi]"}}
	for i, x := range r.Hosts {
		off := "reference"
		if i > 0 {
			off = fmt.Sprintf("%s [%s, %s]", Num(x.OffsetUS), Num(x.OffsetLoUS), Num(x.OffsetHiUS))
		}
		h.Rows = append(h.Rows, []string{x.Input, orDash(x.Host), Count(x.Connections), off})
	}
	h.Notes = append(h.Notes,
		fmt.Sprintf("%s messages, each counted once (%s seen at both ends); %s client round trips split, %s without a server end",
			Count(r.Messages), Count(r.BothEnds), Count(r.RoundTrips), Count(r.Unmatched)),
		"the sections below see each message at both ends: a request is listed once as sent (client) and once as received (server)")
	out := []Section{h}
	if r.RoundTrips == 0 {
		return out
	}
	head := []string{"count", "RTT µs", "client µs", "network out µs", "server queue µs", "server service µs", "network back µs", "network share"}
	row := func(p breakdown.Parts) []string {
		share := "-"
		if p.RTT > 0 {
			share = Share((p.NetOut + p.NetBack) / p.RTT)
		}
		return []string{Num(p.RTT), Num(p.Client), Num(p.NetOut), Num(p.Queue), Num(p.Service), Num(p.NetBack), share}
	}
	c := Section{Title: "Round trips across hosts (mean per round trip)", Header: append([]string{"command"}, head...)}
	c.Rows = append(c.Rows, append([]string{"all", Count(r.RoundTrips)}, row(r.Mean)...))
	for i, x := range r.Commands {
		if i == maxCommandRows {
			c.Notes = append(c.Notes, fmt.Sprintf("%d more commands in --format json", len(r.Commands)-i))
			break
		}
		c.Rows = append(c.Rows, append([]string{orDash(x.Name), Count(x.Count)}, row(x.Mean)...))
	}
	for _, u := range r.Units {
		c.Rows = append(c.Rows, append([]string{"per " + u.Name, fmt.Sprintf("%s (%s round trips each)", Count(u.Count), Num(u.RoundTripsPerUnit))}, row(u.PerUnit)...))
	}
	c.Notes = append(c.Notes,
		"client + network out + server queue + server service + network back = RTT (request's first byte out → reply's last byte in)",
		fmt.Sprintf("each part but the client's is on another host's clock: exact within ±%s µs (the clock interval), the sum exactly", Num(r.ClockUS)),
		"network: a send call's end → the message on the other host (the receiver's call end when it was waiting; else the fastest one-way delay seen)")
	return append(out, c)
}
