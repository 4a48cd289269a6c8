package reports

import (
	"io"

	"github.com/perflab/perflab/analyzers"
)

// Markdown writes the Summary as GitHub-flavoured markdown, for a pull request: one table per
// section, warnings as a list at the end.
func Markdown(w io.Writer, s *analyzers.Summary) error {
	return writeMarkdown(w, "perflab analyze", sections(s), s.Warnings)
}
