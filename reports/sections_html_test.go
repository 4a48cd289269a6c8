package reports

import (
	"bytes"
	"strings"
	"testing"
)

// TestSectionsHTML: the page has the warnings at the top, every section's title, cells and
// notes, numbers right-aligned, and escapes what it is given.
func TestSectionsHTML(t *testing.T) {
	secs := append([]Section{{Title: "<script>x</script>", Header: []string{"a"}, Rows: [][]string{{"<b>"}}}}, benchSections...)
	var b bytes.Buffer
	if err := SectionsHTML(&b, "perflab bench & co", secs, []string{"one <warning>"}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<title>perflab bench &amp; co</title>", `<section class="warnings"`, "<li>one &lt;warning&gt;</li>",
		"RTT scaling (tcp, baseline, depth 1)", `<td class="r">31,000</td>`, `<td>tcp|x</td>`, "saturates after 2 clients",
		"&lt;script&gt;x&lt;/script&gt;", "<td>&lt;b&gt;</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Index(page, "warnings") > strings.Index(page, "RTT scaling") {
		t.Error("the warnings are not at the top")
	}
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page has %q", bad)
		}
	}
	b.Reset()
	if err := SectionsHTML(&b, "t", nil, nil); err != nil || !strings.Contains(b.String(), "No warnings.") {
		t.Errorf("empty page: %v\n%s", err, b.String())
	}
}
