package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/perflab/perflab/compare"
	"github.com/perflab/perflab/models"
)

// Model writes a what-if report (`perflab model`) as a table, or as JSON when format is "json".
func Model(w io.Writer, r *compare.ModelReport, format string) error {
	if r == nil {
		return fmt.Errorf("render model: no report")
	}
	if format == "json" {
		return writeJSON(w, r)
	}
	fmt.Fprintf(w, "what-if from %s (per %s)\n\n", r.Source, r.Unit)
	u := r.Unit
	sec := Section{Header: []string{"scenario", "K", "D", "link RTT", "messages/" + u, "round trips/" + u, "waits/" + u, u + " time", u + "/s", "speedup"},
		Align: "lrrrrrrrrr"}
	row := func(name, k, d, link string, p models.Prediction, speedup string) {
		sec.Rows = append(sec.Rows, []string{name, k, d, link, Num(p.MessagesPerToken),
			Num(p.RoundTripsPerToken), Num(p.WaitsPerToken), modelUS(p.TokenTimeUS), Num(p.TokensPerS), speedup})
	}
	row("baseline (measured)", "1", "1", "-", r.Baseline, "1")
	row("baseline (model)", "1", "1", "-", r.ModelBaseline, Num(r.ModelBaseline.TokensPerS/r.Baseline.TokensPerS))
	for _, s := range r.Scenarios {
		k := fmt.Sprint(s.Coalesce)
		if s.Coalesce <= 0 {
			k = "sync"
		}
		row(s.Name, k, fmt.Sprint(s.Pipeline), modelUS(s.LinkRTTUS), s.Predicted, Num(s.Speedup)+"×")
	}
	if err := writeTextTable(w, &sec); err != nil {
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
		return Num(us/1000) + " ms"
	case us > 0:
		return Num(us) + " µs"
	}
	return "0"
}
