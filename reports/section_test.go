package reports

import (
	"bytes"
	"testing"

	"github.com/perflab/perflab/internal/testutil"
)

var benchSections = []Section{
	{Title: "RTT scaling (tcp, baseline, depth 1)", Header: []string{"clients", "throughput /s", "RTT p50 µs"},
		Rows: [][]string{{"1", "31,000", "30.1"}, {"2", "52,000", "36.4"}}, Notes: []string{"saturates after 2 clients"}},
	{Title: "Little's law", Header: []string{"point", "L"}, Rows: [][]string{{"tcp|x", "0.99"}}},
}

func TestSectionsGolden(t *testing.T) {
	for _, f := range []string{"table", "markdown"} {
		var b bytes.Buffer
		if err := Sections(&b, benchSections, []string{"one warning"}, f); err != nil {
			t.Fatal(err)
		}
		testutil.Golden(t, "bench."+f+".txt", b.Bytes())
	}
	if err := Sections(&bytes.Buffer{}, nil, nil, "html"); err == nil {
		t.Error("format html: no error")
	}
}
