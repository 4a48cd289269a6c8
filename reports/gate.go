package reports

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/perflab/perflab/compare"
)

// GateFormats are the formats of `perflab gate --format`.
var GateFormats = []string{"table", "markdown", "json"}

// Gate writes r in format: "table", "markdown" (a pull-request comment) or "json".
func Gate(w io.Writer, r *compare.GateResult, format string) error {
	if r == nil {
		return fmt.Errorf("render gate: no result")
	}
	switch format {
	case "table", "":
		return gateTable(w, r)
	case "markdown":
		return gateMarkdown(w, r)
	case "json":
		return writeJSON(w, r)
	}
	return fmt.Errorf("render gate: unknown format %q (want %s)", format, strings.Join(GateFormats, ", "))
}

var gateIcon = map[string]string{"pass": "✅", "regression": "❌", "inconclusive": "⚠️"}

func gateTable(w io.Writer, r *compare.GateResult) error {
	fmt.Fprintf(w, "gate: %s\n", strings.ToUpper(r.Verdict))
	fmt.Fprintf(w, "baseline: %d runs; current: %d runs%s\n\n", len(r.Baseline), len(r.Current), relNote(r))
	sec := Section{Header: []string{"rule", "verdict", "detail"}}
	for _, rr := range r.Rules {
		sec.Rows = append(sec.Rows, []string{ruleName(rr), rr.Verdict, rr.Detail})
	}
	if err := writeTextTable(w, &sec); err != nil {
		return fmt.Errorf("render gate: %w", err)
	}
	if len(r.Warnings) > 0 {
		fmt.Fprintln(w)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	return nil
}

func relNote(r *compare.GateResult) string {
	if r.Relative {
		return " (metrics are ratios to reference runs measured alongside)"
	}
	return ""
}

func ruleName(rr compare.RuleResult) string {
	if rr.Direction == "zero" {
		return rr.Metric + " = 0"
	}
	if rr.Direction == "higher" {
		return fmt.Sprintf("%s ≥ -%.0f%%", rr.Metric, 100*rr.Allowed)
	}
	return fmt.Sprintf("%s ≤ +%.0f%%", rr.Metric, 100*rr.Allowed)
}

func gateMarkdown(w io.Writer, r *compare.GateResult) error {
	fmt.Fprintf(w, "### %s perflab gate: **%s**\n\n", gateIcon[r.Verdict], r.Verdict)
	fmt.Fprintf(w, "Baseline: %d runs · current: %d runs%s · α=%g with Holm's correction\n\n", len(r.Baseline), len(r.Current), relNote(r), r.Alpha)
	sec := Section{Header: []string{"rule", "verdict", "baseline", "current", "change", "detail"}, Align: "llrrrl"}
	for _, rr := range r.Rules {
		sec.Rows = append(sec.Rows, []string{ruleName(rr), gateIcon[rr.Verdict] + " " + rr.Verdict,
			cmpOpt(rr.Baseline), cmpOpt(rr.Current), cmpPct(rr.Change), rr.Detail})
	}
	var b strings.Builder
	mdTable(&b, &sec)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("render gate: %w", err)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "\n> ⚠️ %s\n", s)
	}
	return nil
}

func cmpOpt(v *float64) string {
	if v == nil {
		return "-"
	}
	return Num(*v)
}

// GateJUnit writes r as a JUnit XML report: one test suite "perflab gate", one test case per
// rule; a regression is a failure, an inconclusive rule is skipped (or a failure when
// inconclusive verdicts fail the gate).
func GateJUnit(w io.Writer, r *compare.GateResult) error {
	type failure struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type skipped struct {
		Message string `xml:"message,attr"`
	}
	type testcase struct {
		Name      string   `xml:"name,attr"`
		Classname string   `xml:"classname,attr"`
		Failure   *failure `xml:"failure,omitempty"`
		Skipped   *skipped `xml:"skipped,omitempty"`
		Output    string   `xml:"system-out,omitempty"`
	}
	type suite struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []testcase `xml:"testcase"`
	}
	s := suite{Name: "perflab gate", Tests: len(r.Rules)}
	for _, rr := range r.Rules {
		tc := testcase{Name: ruleName(rr), Classname: "perflab.gate", Output: rr.Detail}
		switch {
		case rr.Verdict == "regression":
			tc.Failure = &failure{Message: "regression", Text: rr.Detail}
			s.Failures++
		case rr.Verdict == "inconclusive" && r.OnInconclusive == "fail":
			tc.Failure = &failure{Message: "inconclusive", Text: rr.Detail}
			s.Failures++
		case rr.Verdict == "inconclusive":
			tc.Skipped = &skipped{Message: "inconclusive: " + rr.Detail}
			s.Skipped++
		}
		s.Cases = append(s.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("render junit: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("render junit: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
