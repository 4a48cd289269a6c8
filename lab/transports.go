package lab

import (
	"fmt"
	"slices"

	"github.com/perflab/perflab/reports"
)

// TransportRow sets the transports of a sweep side by side at one client count (same mode and
// depth), to say whether shm, whose point is to skip the kernel, was the fastest, and if not,
// why. JSON field names are a contract (docs/design.md).
type TransportRow struct {
	Mode    string `json:"mode"`
	Depth   int    `json:"depth"`
	Clients int    `json:"clients"`
	// ThroughputPerS is each transport's throughput at this client count, by name.
	ThroughputPerS map[string]float64 `json:"throughput_per_s"`
	Fastest        string             `json:"fastest"`
	ShmFastest     bool               `json:"shm_fastest"`
	// Why says, when shm was not the fastest, what its point measured that explains it (its
	// ring-wait note: CPUs short, polling that did not pay, more pollers than CPUs), or that
	// nothing measured does (then the sweep warns).
	Why string `json:"why,omitempty"`
}

// compareTransports fills res.Transports when the sweep has shm and another transport, and
// warns where shm lost without a measured reason.
func compareTransports(res *Result) {
	type key struct {
		mode           string
		depth, clients int
	}
	byKey := map[key]*TransportRow{}
	var order []key
	shm := map[key]*Point{}
	for i := range res.Points {
		p := &res.Points[i]
		k := key{p.Mode, p.Depth, p.Clients}
		r := byKey[k]
		if r == nil {
			r = &TransportRow{Mode: p.Mode, Depth: p.Depth, Clients: p.Clients, ThroughputPerS: map[string]float64{}}
			byKey[k] = r
			order = append(order, k)
		}
		r.ThroughputPerS[p.Transport] = p.ThroughputPerS
		if p.Transport == "shm" {
			shm[k] = p
		}
	}
	for _, k := range order {
		r := byKey[k]
		sp := shm[k]
		if sp == nil || len(r.ThroughputPerS) < 2 {
			continue
		}
		for _, t := range []string{"shm", "unix", "tcp"} {
			if v, ok := r.ThroughputPerS[t]; ok && (r.Fastest == "" || v > r.ThroughputPerS[r.Fastest]) {
				r.Fastest = t
			}
		}
		r.ShmFastest = r.Fastest == "shm"
		if !r.ShmFastest {
			if sp.ShmSpin != nil && sp.ShmSpin.Note != "" {
				r.Why = sp.ShmSpin.Note
			} else {
				r.Why = "nothing measured explains it: polling paid and the CPUs were not short"
				res.Warnings = append(res.Warnings, fmt.Sprintf("%s: shm (%s/s) is slower than %s (%s/s) and %s", sp.Label(),
					reports.Count(r.ThroughputPerS["shm"]), r.Fastest, reports.Count(r.ThroughputPerS[r.Fastest]), r.Why))
			}
		}
		res.Transports = append(res.Transports, *r)
	}
}

// transportsSection lays out res.Transports: each transport's throughput per client count, the
// fastest, and why shm was not where it was not.
func transportsSection(res *Result) []reports.Section {
	if len(res.Transports) == 0 {
		return nil
	}
	var names []string
	for _, r := range res.Transports {
		for t := range r.ThroughputPerS {
			if !slices.Contains(names, t) {
				names = append(names, t)
			}
		}
	}
	slices.SortFunc(names, func(a, b string) int { return transportRank(a) - transportRank(b) })
	sec := reports.Section{Title: "Transports at each client count (throughput /s)", Header: []string{"mode", "depth", "clients"}}
	sec.Header = append(sec.Header, names...)
	sec.Header = append(sec.Header, "fastest")
	wins := 0
	for _, r := range res.Transports {
		row := []string{r.Mode, reports.Count(r.Depth), reports.Count(r.Clients)}
		for _, t := range names {
			if v, ok := r.ThroughputPerS[t]; ok {
				row = append(row, reports.Count(v))
			} else {
				row = append(row, "-")
			}
		}
		sec.Rows = append(sec.Rows, append(row, r.Fastest))
		if r.ShmFastest {
			wins++
		} else {
			sec.Notes = append(sec.Notes, fmt.Sprintf("shm not the fastest at %s (%s, depth %d): %s", plural(r.Clients, "client"), r.Mode, r.Depth, r.Why))
		}
	}
	verdict := "shm was the fastest transport at every client count"
	if wins < len(res.Transports) {
		verdict = fmt.Sprintf("shm was the fastest transport at %d of %d client counts; where it was not, the line below says why", wins, len(res.Transports))
	}
	sec.Notes = append([]string{verdict}, sec.Notes...)
	return []reports.Section{sec}
}

func transportRank(t string) int {
	switch t {
	case "shm":
		return 0
	case "unix":
		return 1
	}
	return 2
}
