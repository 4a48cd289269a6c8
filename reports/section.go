package reports

import (
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// Section is one titled table of a report: analyze's sections, the lab's load sweep, compare's,
// gate's and model's tables are all Sections, laid out by one engine, so every verb's tables
// look alike. Cells are already formatted (with Num, Count, Share, Change, ...).
type Section struct {
	Title  string // empty: no title line (the caller printed its own heading)
	Header []string
	Rows   [][]string
	Notes  []string // lines under the table; a section without a header is its notes alone
	// Align has one letter per column, 'l' (left) or 'r' (right). A column without a letter is
	// right-aligned when its cells are numbers (some may be "-" or "n/a": no number), left-aligned
	// otherwise.
	Align string
}

// numericCell matches a cell that reads as a number: "1,234", "-75.0%", "≤0.002", "2.5×",
// "12.5 µs".
var numericCell = regexp.MustCompile(`^[-+≤<]?[0-9][0-9,.]*(%|×| µs| ms| s)?$`)

// blankCell is a cell that says nothing about its column's kind.
func blankCell(s string) bool { return s == "" || s == "-" || s == "n/a" }

// rightAligned reports, per column, whether sec's table aligns it to the right.
func (sec *Section) rightAligned() []bool {
	out := make([]bool, len(sec.Header))
	for i := range out {
		if i < len(sec.Align) {
			out[i] = sec.Align[i] == 'r'
			continue
		}
		text, numbers := false, false
		for _, r := range sec.Rows {
			switch {
			case i >= len(r) || blankCell(r[i]):
			case numericCell.MatchString(r[i]):
				numbers = true
			default:
				text = true
			}
		}
		out[i] = numbers && !text
	}
	return out
}

// Sections writes sections in format "table" (plain text for a terminal) or "markdown", then the
// warnings. It is how `perflab bench` prints its tables.
func Sections(w io.Writer, secs []Section, warnings []string, format string) error {
	switch format {
	case "", "table":
		return writeText(w, secs, warnings)
	case "markdown":
		return writeMarkdown(w, "", secs, warnings)
	}
	return fmt.Errorf("format %q: want table or markdown", format)
}

// writeText writes secs as plain-text tables, a blank line between them, then the warnings.
func writeText(w io.Writer, secs []Section, warnings []string) error {
	for i := range secs {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := writeTextSection(w, &secs[i]); err != nil {
			return err
		}
	}
	return writeWarnings(w, warnings, "warning: ")
}

// writeTextSection writes one section: its title, its table, its notes indented under it.
func writeTextSection(w io.Writer, sec *Section) error {
	if sec.Title != "" {
		if _, err := fmt.Fprintf(w, "%s\n", sec.Title); err != nil {
			return err
		}
	}
	if len(sec.Header) > 0 {
		if err := writeTextTable(w, sec); err != nil {
			return err
		}
	}
	for _, n := range sec.Notes {
		if _, err := fmt.Fprintf(w, "  %s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// writeTextTable draws sec's header and rows as an ASCII table.
func writeTextTable(w io.Writer, sec *Section) error {
	align := make([]tw.Align, len(sec.Header))
	for i, right := range sec.rightAligned() {
		align[i] = tw.AlignLeft
		if right {
			align[i] = tw.AlignRight
		}
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRendition(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)}),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
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
	return nil
}

// writeMarkdown writes secs as GitHub-flavoured markdown under an optional "## heading": one
// "###" title and table per section, notes in italics under it (a section without a table: a
// list), the warnings as a list at the end.
func writeMarkdown(w io.Writer, heading string, secs []Section, warnings []string) error {
	var b strings.Builder
	if heading != "" {
		b.WriteString("## " + mdEscape(heading) + "\n\n")
	}
	for i := range secs {
		if i > 0 {
			b.WriteString("\n")
		}
		mdSection(&b, &secs[i])
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

// mdSection writes one section as markdown.
func mdSection(b *strings.Builder, sec *Section) {
	if sec.Title != "" {
		b.WriteString("### " + mdEscape(sec.Title) + "\n\n")
	}
	if len(sec.Header) == 0 {
		for _, n := range sec.Notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
		return
	}
	mdTable(b, sec)
	if len(sec.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range sec.Notes {
			b.WriteString("_" + mdEscape(n) + "_\n")
		}
	}
}

// mdTable writes sec's header and rows as a markdown table, numbers aligned right.
func mdTable(b *strings.Builder, sec *Section) {
	b.WriteString("| " + strings.Join(mdCells(sec.Header), " | ") + " |\n")
	b.WriteString("|")
	for _, right := range sec.rightAligned() {
		if right {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, r := range sec.Rows {
		b.WriteString("| " + strings.Join(mdCells(r), " | ") + " |\n")
	}
}

// writeWarnings writes warnings one a line after a blank line, each after prefix.
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

func mdCells(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = mdEscape(s)
	}
	return out
}

// mdEscape keeps a cell on one line and inert: pipes, newlines and markup characters from a
// trace (connection addresses, command names) cannot break the table or inject markup.
func mdEscape(s string) string { return mdEscaper.Replace(s) }

var mdEscaper = strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)
