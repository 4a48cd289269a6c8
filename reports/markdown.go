package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/perflab/perflab/analyzers"
)

// Markdown writes the Summary as GitHub-flavoured markdown, for a pull request: one table per
// section, warnings as a list at the end.
func Markdown(w io.Writer, s *analyzers.Summary) error {
	var b strings.Builder
	b.WriteString("## perflab analyze\n")
	for _, sec := range sections(s) {
		fmt.Fprintf(&b, "\n### %s\n\n", sec.title)
		if len(sec.header) == 0 {
			for _, n := range sec.notes {
				b.WriteString("- " + mdEscape(n) + "\n")
			}
			continue
		}
		b.WriteString("| " + strings.Join(mdCells(sec.header), " | ") + " |\n")
		b.WriteString("|" + strings.Repeat(" --- |", len(sec.header)) + "\n")
		for _, r := range sec.rows {
			b.WriteString("| " + strings.Join(mdCells(r), " | ") + " |\n")
		}
		if len(sec.notes) > 0 {
			b.WriteString("\n")
			for _, n := range sec.notes {
				b.WriteString("_" + mdEscape(n) + "_\n")
			}
		}
	}
	if len(s.Warnings) > 0 {
		b.WriteString("\n### Warnings\n\n")
		for _, x := range s.Warnings {
			b.WriteString("- " + mdEscape(x) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
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
func mdEscape(s string) string {
	r := strings.NewReplacer("|", `\|`, "\n", " ", "\r", " ", "<", "&lt;", ">", "&gt;", "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)
	return r.Replace(s)
}
