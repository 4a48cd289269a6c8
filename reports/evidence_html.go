package reports

import (
	"html/template"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/evidence"
)

// evidenceCharts are the HTML figures of the evidence: where each command's round-trip time
// went, as a stacked bar of its causes (mean µs per round trip). None without an attribution.
func evidenceCharts(s *analyzers.Summary) []chart {
	if s.Evidence == nil || s.Evidence.Attribution == nil {
		return nil
	}
	a := s.Evidence.Attribution
	cats := []string{"(all)"}
	vals := make([][]float64, len(evidence.Causes))
	add := func(cs []evidence.Cause) {
		for i, c := range cs {
			if i < len(vals) {
				vals[i] = append(vals[i], c.MeanUS)
			}
		}
	}
	add(a.Causes)
	for _, c := range a.Commands {
		cats = append(cats, c.Command)
		add(c.Causes)
	}
	var notes []string
	if !a.SchedKnown {
		notes = append(notes, "no scheduler evidence: wake-up and run-queue time is inside waiting")
	}
	return []chart{{"attribution", "Where the round-trip time went: each command's mean round trip, split into the client's own time, sending, waiting for the reply, retransmission, waking an idle CPU, the run queue and reading it.",
		template.HTML(stackedBars("attribution", "Where the round-trip time went", "µs per round trip", cats, evidence.Causes, vals, notes))}}
}
