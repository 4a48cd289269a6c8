package reports

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/models"
)

// Model writes a what-if report (`perflab model`) as a table, or as JSON when format is "json".
func Model(w io.Writer, r *analyzers.ModelReport, format string) error {
	if r == nil {
		return fmt.Errorf("render model: no report")
	}
	if format == "json" {
		return writeJSON(w, r)
	}
	fmt.Fprintf(w, "what-if from %s (per %s)\n\n", r.Source, r.Unit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tK\tD\tlink RTT\tmessages/%s\tround trips/%s\twaits/%s\t%s time\t%s/s\tspeedup\n", r.Unit, r.Unit, r.Unit, r.Unit, r.Unit)
	row := func(name, k, d, link string, p models.Prediction, speedup string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, k, d, link, cmpValue(p.MessagesPerToken),
			cmpValue(p.RoundTripsPerToken), cmpValue(p.WaitsPerToken), modelUS(p.TokenTimeUS), cmpValue(p.TokensPerS), speedup)
	}
	row("baseline (measured)", "1", "1", "-", r.Baseline, "1")
	row("baseline (model)", "1", "1", "-", r.ModelBaseline, cmpValue(r.ModelBaseline.TokensPerS/r.Baseline.TokensPerS))
	for _, s := range r.Scenarios {
		k := fmt.Sprint(s.Coalesce)
		if s.Coalesce <= 0 {
			k = "sync"
		}
		row(s.Name, k, fmt.Sprint(s.Pipeline), modelUS(s.LinkRTTUS), s.Predicted, cmpValue(s.Speedup)+"×")
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("render model: %w", err)
	}
	if len(r.Calls) > 0 {
		fmt.Fprintf(w, "\ncalls of one token (%d): %s\n", len(r.Calls), strings.Join(r.Calls, " "))
	}
	fmt.Fprintln(w, "\nassumptions:")
	for _, a := range r.Assumptions {
		fmt.Fprintf(w, "  - %s\n", a)
	}
	return nil
}

func modelUS(us float64) string {
	switch {
	case us >= 1000:
		return cmpValue(us/1000) + " ms"
	case us > 0:
		return cmpValue(us) + " µs"
	}
	return "0"
}
