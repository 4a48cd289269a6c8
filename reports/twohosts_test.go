package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/breakdown"
	"github.com/perflab/perflab/trace"
)

// twoHostsReport splits two round trips of one connection seen from a client and a server
// named with markup, in one unit of work.
func twoHostsReport() *breakdown.Report {
	const srv = 1 << 40
	b := breakdown.New([]trace.Clock{{Input: "c.plt", Host: "<client>", Peer: -1}, {Input: "s.plt", Host: "gpu&box", ConnBase: srv, OffsetLoNS: -500, OffsetHiNS: 500}})
	b.Conn(trace.Connection{ID: 1, Family: trace.FamilyTCP, Local: "10.0.0.1:4000", Remote: "10.0.0.2:80"})
	b.Conn(trace.Connection{ID: srv | 1, Family: trace.FamilyTCP, Local: "10.0.0.2:80", Remote: "10.0.0.1:4000"})
	b.Marker(trace.Marker{Name: "token", TS: 0, Dur: 1e6})
	for i, t0 := range []int64{1000, 300000} {
		name := []string{"vkQueueSubmit", "<i>x"}[i]
		b.Message(breakdown.Msg{Conn: 1, Send: true, TS: t0, End: t0 + 10e3, Size: 64, Name: name})
		b.Message(breakdown.Msg{Conn: srv | 1, TS: t0 - 500, End: t0 + 60e3, Size: 64, Name: name})
		b.Message(breakdown.Msg{Conn: srv | 1, Send: true, TS: t0 + 100e3, End: t0 + 105e3, Size: 28, Name: name, Reply: true, ReqTS: t0 - 500})
		b.Message(breakdown.Msg{Conn: 1, TS: t0 + 11e3, End: t0 + 150e3, Size: 28, Name: name, Reply: true, ReqTS: t0})
	}
	return b.Report("")
}

func TestTwoHostsHTML(t *testing.T) {
	var buf bytes.Buffer
	if err := HTML(&buf, &analyzers.Summary{Traces: []string{"both.plt"}, TwoHosts: twoHostsReport()}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	cs := charts(t, page)
	// Each round trip draws the client's send and read, the flights out and back, queue and service.
	if c := cs["swimlanes"]; c.noData || c.marks != 12 {
		t.Errorf("swim lanes: %+v, want 12 marks (6 per round trip)", c)
	}
	if c := cs["hostsplit"]; c.noData || c.marks == 0 {
		t.Errorf("per-command split: %+v, want bars", c)
	}
	if strings.Contains(page, "<client>") || strings.Contains(page, "<i>x") || !strings.Contains(page, "&lt;client&gt;") {
		t.Error("host or command names are not escaped")
	}
}

func TestTwoHostsTable(t *testing.T) {
	var buf bytes.Buffer
	if err := Table(&buf, &analyzers.Summary{Traces: []string{"both.plt"}, TwoHosts: twoHostsReport()}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"Two hosts", "Round trips across hosts", "per token", "within ±0.5 µs"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
