package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Section is one titled table laid out by a caller that computes outside reports (the lab's
// load sweep): cells already formatted, notes printed under the table.
type Section struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
	// Align has one letter per column, 'l' (left) or 'r' (right); missing letters mean: the
	// first column left, the others right (labels, then numbers).
	Align string
}

// alignments returns the per-column alignment of sec in the table format.
func (sec *Section) alignments() []tw.Align {
	out := make([]tw.Align, len(sec.Header))
	for i := range out {
		out[i] = tw.AlignRight
		if i == 0 {
			out[i] = tw.AlignLeft
		}
		if i < len(sec.Align) {
			switch sec.Align[i] {
			case 'l':
				out[i] = tw.AlignLeft
			case 'r':
				out[i] = tw.AlignRight
			}
		}
	}
	return out
}

// Sections writes sections in format "table" (plain text for a terminal) or "markdown", then the
// warnings. It is how `perflab bench` prints its tables.
func Sections(w io.Writer, secs []Section, warnings []string, format string) error {
	switch format {
	case "", "table":
		for i, sec := range secs {
			if i > 0 {
				if _, err := fmt.Fprintln(w); err != nil {
					return err
				}
			}
			if _, err := fmt.Fprintf(w, "%s\n", sec.Title); err != nil {
				return err
			}
			t := tablewriter.NewTable(w,
				tablewriter.WithRendition(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)}),
				tablewriter.WithHeaderAutoFormat(tw.Off),
				tablewriter.WithHeaderAlignment(tw.AlignLeft),
				tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: sec.alignments()}),
				tablewriter.WithRowAutoWrap(tw.WrapNone),
				tablewriter.WithHeaderAutoWrap(tw.WrapNone),
			)
			t.Header(toAny(sec.Header)...)
			for _, r := range sec.Rows {
				if err := t.Append(toAny(r)...); err != nil {
					return fmt.Errorf("render table %s: %w", sec.Title, err)
				}
			}
			if err := t.Render(); err != nil {
				return fmt.Errorf("render table %s: %w", sec.Title, err)
			}
			for _, n := range sec.Notes {
				if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
					return err
				}
			}
		}
		return writeWarnings(w, warnings, "warning: ")
	case "markdown":
		var b strings.Builder
		for i, sec := range secs {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "### %s\n\n", mdEscape(sec.Title))
			b.WriteString("| " + strings.Join(mdCells(sec.Header), " | ") + " |\n")
			b.WriteString("|" + strings.Repeat(" --- |", len(sec.Header)) + "\n")
			for _, r := range sec.Rows {
				b.WriteString("| " + strings.Join(mdCells(r), " | ") + " |\n")
			}
			if len(sec.Notes) > 0 {
				b.WriteString("\n")
				for _, n := range sec.Notes {
					b.WriteString("_" + mdEscape(n) + "_\n")
				}
			}
		}
		if len(warnings) > 0 {
			b.WriteString("\n### Warnings\n\n")
			for _, x := range warnings {
				b.WriteString("- " + mdEscape(x) + "\n")
			}
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	return fmt.Errorf("format %q: want table or markdown", format)
}
