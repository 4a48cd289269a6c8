package reports

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

func renderHTML(t *testing.T, s *analyzers.Summary) string {
	t.Helper()
	var buf bytes.Buffer
	if err := HTML(&buf, s); err != nil {
		t.Fatalf("HTML: %v", err)
	}
	return buf.String()
}

// chartInfo is what a browser test would see of one chart.
type chartInfo struct {
	n      int  // data-n of the <svg>
	marks  int  // elements of class datum
	noData bool // the "no data" figure
}

var figureRE = regexp.MustCompile(`(?s)<figure id="chart-([a-z]+)">\s*(<svg.*?</svg>)`)

// charts finds the charts of a page, checks that each SVG is well-formed XML whose data-n
// matches its data marks, and returns them by name.
func charts(t *testing.T, page string) map[string]chartInfo {
	t.Helper()
	out := map[string]chartInfo{}
	for _, m := range figureRE.FindAllStringSubmatch(page, -1) {
		name, svg := m[1], m[2]
		var ci chartInfo
		d := xml.NewDecoder(strings.NewReader(svg))
		d.Strict = true
		depth := 0
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("chart %s is not well-formed SVG: %v\n%s", name, err, svg)
			}
			switch e := tok.(type) {
			case xml.StartElement:
				depth++
				for _, a := range e.Attr {
					switch {
					case e.Name.Local == "svg" && a.Name.Local == "data-n":
						ci.n, _ = strconv.Atoi(a.Value)
					case e.Name.Local == "svg" && a.Name.Local == "class" && strings.Contains(a.Value, "nodata"):
						ci.noData = true
					case a.Name.Local == "class" && a.Value == "datum":
						ci.marks++
					}
				}
			case xml.EndElement:
				depth--
			}
		}
		if depth != 0 {
			t.Fatalf("chart %s: unbalanced elements", name)
		}
		if ci.n != ci.marks {
			t.Errorf("chart %s: data-n=%d but %d data marks", name, ci.n, ci.marks)
		}
		if ci.noData && !strings.Contains(svg, "no data") {
			t.Errorf("chart %s is empty without saying so", name)
		}
		if !ci.noData && ci.marks == 0 {
			t.Errorf("chart %s has no data marks and no note", name)
		}
		out[name] = ci
	}
	want := 8
	if _, merged := out["swimlanes"]; merged {
		want += 2 // a merged trace's split across hosts
	}
	if _, ok := out["attribution"]; ok { // where the round-trip time went, with evidence
		want++
	}
	if len(out) != want {
		t.Fatalf("found %d charts, want %d: %v", len(out), want, out)
	}
	return out
}

// checkSelfContained fails when the page could make a request: external URLs, resources,
// scripts, or CSS imports.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"http:", "https:", "//cdn", "src=", "href=", "@import", "url(", "<script", "<link", "<iframe", "<object", "<embed"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("page contains %q: not self-contained", bad)
		}
	}
}

// richSummary is a hand-built analysis that fills every field the page shows, so that the
// golden file covers every table and chart whatever the analyzers compute today.
func richSummary() *analyzers.Summary {
	s := &analyzers.Summary{
		Schema: analyzers.SummarySchema, Traces: []string{"before.plt", "after.plt"}, Protocol: "venus",
		Meta: []trace.Meta{{Version: "v0.1", Host: "lab", Kernel: "6.18.0", Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			Command: []string{"venus-client", "--tokens", "64"}, PIDs: []uint32{100, 101}, Source: "ebpf",
			Labels: map[string]string{"mode": "coalesce", "host": "a"}}},
		Events: 12345, Lost: 7, Duration: 3.25,
		Recovery: &trace.Recovery{ChunksRead: 10, ChunksBad: 1, TruncatedBytes: 33},
		Totals: analyzers.Totals{Send: analyzers.DirTotals{Calls: 6000, Bytes: 7_000_000, Frames: 6100},
			Recv: analyzers.DirTotals{Calls: 5000, Bytes: 900_000, Frames: 5000}},
		Errors: []analyzers.ErrnoCount{{Errno: 11, Name: "EAGAIN", Dir: "recv", Count: 42}},
		Connections: []analyzers.ConnStats{{ID: 1, Family: "tcp", Local: "127.0.0.1:40000", Remote: "127.0.0.1:5556", PID: 100,
			Send: analyzers.DirStats{Calls: 6000, Bytes: 7_000_000, LatencyUS: analyzers.Latency{P50: 6.5, P90: 9, P99: 12.25, Max: 80}},
			Recv: analyzers.DirStats{Calls: 5000, Bytes: 900_000, LatencyUS: analyzers.Latency{P50: 9.5, P90: 10, P99: 11, Max: 90}}}},
		Commands: []analyzers.CmdStats{
			{Protocol: "venus", Name: "vkQueueSubmit", ID: 18, Direction: "send", Count: 64, Bytes: 6_400_000},
			{Protocol: "venus", Name: "vkWaitForFences", ID: 39, Direction: "send", Count: 64, Bytes: 2048,
				RTTUS: &analyzers.Latency{P50: 9800, P90: 11000, P99: 12000, Max: 15000}},
		},
		RoundTrips: analyzers.RoundTrips{Count: 5000, BlockedS: 2.5, Unanswered: 1,
			RTTUS:     analyzers.Latency{P50: 40, P90: 90, P99: 450, P999: 800, Max: 1200, Mean: 60, P50Low: 38, P50High: 43, N: 5000},
			ServiceUS: &analyzers.Latency{P50: 20, P99: 60, Max: 100}},
		Units: []analyzers.UnitStats{{Name: "token", Count: 64, MessagesPerUnit: 156.25, RoundTripsPerUnit: 78, BytesSentPerUnit: 109375,
			BytesRecvPerUnit: 14062, UnitTimeUS: 50_000, NetWaitUS: 39_000, UnitsPerS: 20, MaxSpeedup: 4.54}},
		Phases: []analyzers.PhaseStats{{Name: "load", StartS: 0, DurationS: 0.5, Messages: 100, Bytes: 1e6},
			{Name: "generate", StartS: 0.5, DurationS: 2.75, Messages: 10000, Bytes: 6.9e6}},
		Windows:    []analyzers.Window{{Dir: "send", Calls: 100, AvgUS: 7, AvgBytes: 1100, MaxUS: 80}},
		InFlight:   &analyzers.InFlight{Mean: 1.8, Max: 4, Series: []analyzers.TimePoint{{TS: 0, Value: 1}, {TS: 1, Value: 2}, {TS: 2, Value: 4}, {TS: 3, Value: 1}}},
		LittlesLaw: []analyzers.LittleRow{{Label: "1 client", InFlight: 1, ThroughputPerS: 180000, RTTPredictedUS: 5.55, RTTMeasuredUS: 5.6, Error: -0.009}, {Label: "16 clients", InFlight: 16, ThroughputPerS: 1.61e6, RTTPredictedUS: 9.9, RTTMeasuredUS: 10.2, Error: -0.03}},
		BatchFit: &analyzers.BatchFit{TFixedUS: 5.0, TPerReqUS: 0.952, R2: 0.991, TFixedCI: [2]float64{4.6, 5.4},
			TPerReqCI: [2]float64{0.9, 1.0}, Points: 5, ThroughputMax: 1.05e6},
		BatchRefinement: []analyzers.Refinement{{N: 2, TPerReqUS: 0.8}, {N: 4, TPerReqUS: 0.9}, {N: 8, TPerReqUS: 0.95}},
		Modes:           []analyzers.Mode{{CenterUS: 45, Share: 0.9, LowUS: 20, HighUS: 100}, {CenterUS: 450, Share: 0.1, LowUS: 300, HighUS: 900}},
		Timeline:        []analyzers.TimePoint{{TS: 0, Value: 3000}, {TS: 1, Value: 3500}, {TS: 2, Value: 3400}, {TS: 3, Value: 3300}},
		Warnings:        []string{"7 events lost: counts are lower bounds", "p99 interval needs ≥ 100 samples"},
	}
	for lo := 10.0; lo < 2000; lo *= 1.5 {
		c := uint64(1000 / (1 + (lo-45)*(lo-45)/400))
		if lo > 300 && lo < 900 {
			c += 50
		}
		s.Histogram = append(s.Histogram, analyzers.HistBucket{LowUS: lo, HighUS: lo * 1.5, Count: c})
	}
	return s
}

func TestHTMLRich(t *testing.T) {
	page := renderHTML(t, richSummary())
	checkSelfContained(t, page)
	for name, ci := range charts(t, page) {
		if ci.noData {
			t.Errorf("chart %s shows no data on a full summary", name)
		}
	}
	for _, want := range []string{
		`id="warnings" role="alert"`, "7 events lost: counts are lower bounds", "p99 interval needs ≥ 100 samples",
		"7 events were lost by the recorder", "chunks_bad", // notices
		`id="totals"`, `id="errors"`, `id="connections"`, `id="commands"`, `id="round-trips"`, `id="units"`,
		`id="phases"`, `id="littles-law"`, `id="batch-fit"`, `id="batch-refinement"`, `id="modes"`, `id="windows"`, `id="meta"`,
		"4.6 – 5.4", "vkWaitForFences", "EAGAIN", "host=a mode=coalesce",
	} {
		if want == "chunks_bad" {
			want = "the trace was damaged or cut"
		}
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	testutil.Golden(t, "html_rich.html", []byte(page))
}

func TestHTMLEmpty(t *testing.T) {
	page := renderHTML(t, &analyzers.Summary{Schema: analyzers.SummarySchema})
	checkSelfContained(t, page)
	for name, ci := range charts(t, page) {
		if !ci.noData || ci.n != 0 {
			t.Errorf("chart %s of an empty summary: %+v, want the no-data figure", name, ci)
		}
	}
	if !strings.Contains(page, "No warnings.") {
		t.Error("an empty summary should say it has no warnings")
	}
	if err := HTML(io.Discard, nil); err == nil {
		t.Error("HTML(nil) gave no error")
	}
}

// TestHTMLHostile puts markup and script into every string a trace can carry: none may reach
// the page unescaped.
func TestHTMLHostile(t *testing.T) {
	const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>"'&`
	s := richSummary()
	s.Traces = []string{evil}
	s.Protocol = evil
	s.Meta[0].Host, s.Meta[0].Kernel, s.Meta[0].Command = evil, evil, []string{evil}
	s.Meta[0].Labels = map[string]string{evil: evil}
	s.Connections[0].Local, s.Connections[0].Remote, s.Connections[0].Family = evil, evil, evil
	s.Commands[0].Name, s.Commands[0].Protocol = evil, evil
	s.Units[0].Name = evil
	s.Phases[0].Name = evil
	s.LittlesLaw[0].Label = evil
	s.Errors[0].Name = evil
	s.Warnings = append(s.Warnings, evil)
	page := renderHTML(t, s)
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("hostile text reached the page unescaped: %q at %q", bad, page[max(0, i-80):min(len(page), i+80)])
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the hostile warning is not shown escaped")
	}
	charts(t, page) // the SVG stays well-formed
}

func TestHTMLTraces(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, golden string
		path         string
		data         []string // charts that must have data
	}{
		{"pingpong", "html_pingpong.html", pingpongTrace(t, dir), []string{"histogram", "cdf", "timeline", "inflight", "commands", "attribution"}},
		{"venus", "html_venus.html", venusTrace(t, dir, "venus.plt", trace.SourceEBPF, 8), []string{"histogram", "cdf", "timeline", "inflight", "units", "commands"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := analyzers.Analyze(protocol.Files([]string{tc.path}, nil), analyzers.Options{})
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			page := renderHTML(t, s)
			checkSelfContained(t, page)
			cs := charts(t, page)
			for _, name := range tc.data {
				if cs[name].noData || cs[name].marks == 0 {
					t.Errorf("chart %s is empty", name)
				}
			}
			testutil.Golden(t, tc.golden, []byte(page))
		})
	}
}

func TestScales(t *testing.T) {
	check := func(name string, got []float64, want ...float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: ticks %v, want %v", name, got, want)
			return
		}
		for i := range got {
			if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: ticks %v, want %v", name, got, want)
				return
			}
		}
	}
	check("lin 0..7", linScale(0, 7).ticks(), 0, 2, 4, 6, 8)
	check("lin 0..1", linScale(0, 1).ticks(), 0, 0.2, 0.4, 0.6, 0.8, 1)
	check("lin flat", linScale(5, 5).ticks(), 0, 2, 4, 6, 8, 10)
	check("log 3..4000", logScale(3, 4000).ticks(), 1, 10, 100, 1000, 10000)
	check("log 15..80", logScale(15, 80).ticks(), 10, 20, 50, 100)
	s := logScale(1, 1000)
	s.p0, s.p1 = 0, 300
	if got := s.px(10); got != 100 {
		t.Errorf("log px(10) = %v, want 100", got)
	}
	if got := s.px(0); got != 0 {
		t.Errorf("log px(0) = %v, want the axis start", got)
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{{0, "0"}, {1.5, "1.5"}, {12345, "12.3k"}, {2.5e6, "2.5M"}, {3e9, "3G"}, {0.001, "0.001"}} {
		if got := tickLabel(tc.v); got != tc.want {
			t.Errorf("tickLabel(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

// TestHTMLLongTables checks that very long tables are cut, with a note, so that the page stays
// light on a long recording.
func TestHTMLLongTables(t *testing.T) {
	s := richSummary()
	for i := range 1000 {
		s.Windows = append(s.Windows, analyzers.Window{Dir: "send", Calls: uint64(100 * (i + 2))})
		s.Connections = append(s.Connections, analyzers.ConnStats{ID: uint64(i + 2), Family: "tcp"})
	}
	page := renderHTML(t, s)
	// The totals table has a "send" row too.
	if got := strings.Count(page, `<tr><td class="l">send</td>`) - 1; got != htmlMaxWindows {
		t.Errorf("%d window rows, want %d", got, htmlMaxWindows)
	}
	if !strings.Contains(page, "901 more windows") || !strings.Contains(page, "801 more connections") {
		t.Error("the cut tables do not say how many rows are left out")
	}
}

// TestHTMLOddNumbers feeds NaN, infinities, negatives and zeros where a summary has numbers:
// the page must still render, with well-formed charts and no "NaN" in the SVG.
func TestHTMLOddNumbers(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for _, v := range []float64{nan, inf, -inf, -5, 0, 1e300} {
		s := richSummary()
		for i := range s.Histogram {
			s.Histogram[i].LowUS, s.Histogram[i].HighUS = v, v
		}
		s.Histogram = append(s.Histogram, analyzers.HistBucket{LowUS: 1, HighUS: 2, Count: 3})
		s.Timeline = append(s.Timeline, analyzers.TimePoint{TS: v, Value: v})
		s.InFlight.Series = append(s.InFlight.Series, analyzers.TimePoint{TS: v, Value: v})
		s.BatchFit.TFixedUS, s.BatchFit.TPerReqUS, s.BatchFit.R2 = v, v, v
		s.LittlesLaw[0].InFlight, s.LittlesLaw[0].RTTMeasuredUS = v, v
		s.Units[0].UnitTimeUS, s.Units[0].NetWaitUS = v, v
		s.Modes[0].CenterUS = v
		s.RoundTrips.RTTUS.P50 = v
		page := renderHTML(t, s)
		charts(t, page)
		for _, m := range figureRE.FindAllStringSubmatch(page, -1) {
			if strings.Contains(m[2], "NaN") || strings.Contains(m[2], "Inf") {
				t.Errorf("value %v: chart %s contains NaN or Inf", v, m[1])
			}
		}
	}
}

// BenchmarkHTML measures rendering the page of a full summary (the analysis is not timed).
func BenchmarkHTML(b *testing.B) {
	s := richSummary()
	for i := range 10_000 {
		s.Timeline = append(s.Timeline, analyzers.TimePoint{TS: float64(i) / 1000, Value: float64(i % 97)})
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := HTML(io.Discard, s); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHTMLServerTrace: a real llama.cpp RPC server's trace gets the service-time histogram
// and the requests-in-service chart, the "In short" lines at the top, and full command names.
func TestHTMLServerTrace(t *testing.T) {
	for _, path := range []string{"../fixtures/real/llamacpp/server-fitoff.plt", "../fixtures/real/venusplus/server-phase2.plt"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s, err := analyzers.Analyze(protocol.Files([]string{path}, nil), analyzers.Options{})
			if err != nil {
				t.Fatalf("Analyze: %v", err)
			}
			page := renderHTML(t, s)
			cs := charts(t, page)
			for _, name := range []string{"histogram", "tail", "cdf", "inflight", "commands"} {
				if cs[name].noData || cs[name].marks == 0 {
					t.Errorf("chart %s is empty", name)
				}
			}
			for _, want := range []string{"Server service time histogram", "Requests in service (server)", `id="in-short"`, "round trips served"} {
				if !strings.Contains(page, want) {
					t.Errorf("page lacks %q", want)
				}
			}
			if strings.Contains(path, "llamacpp") && !(strings.Contains(page, "<th>requests/unit</th><th>replies/unit</th>") && strings.Contains(page, ">steady<")) {
				t.Error("the units table does not count requests and replies apart in the steady state")
			}
			if i, j := strings.Index(page, `id="in-short"`), strings.Index(page, `<h2>Charts</h2>`); i < 0 || j < i {
				t.Error(`"In short" is not above the charts`)
			}
			// Every command is named in full on the bars of the commands chart.
			svg := page[strings.Index(page, `data-chart="commands"`):]
			svg = svg[:strings.Index(svg, "</svg>")]
			for _, c := range s.Commands[:min(len(s.Commands), 12)] {
				if c.Name != "" && !strings.Contains(svg, ">"+c.Name+"</text>") {
					t.Errorf("commands chart lacks the full name %q", c.Name)
				}
			}
			if strings.Contains(svg, "…</text>") {
				t.Error("a command name is cut")
			}
		})
	}
}

// TestHTMLModeOnItsBin: each mode's marker is drawn at the middle of the histogram bar that
// holds the mode's centre.
func TestHTMLModeOnItsBin(t *testing.T) {
	s := richSummary()
	page := string(histogramChart(s))
	for _, m := range s.Modes {
		label := "mode " + Num(m.CenterUS) + " µs"
		i := strings.Index(page, label)
		if i < 0 {
			t.Fatalf("no marker %q", label)
		}
		// the marker's line is just before its label: <line x1="X" ...><text ...>label
		line := page[strings.LastIndex(page[:i], "<line x1=\"")+len("<line x1=\""):]
		x, _ := strconv.ParseFloat(line[:strings.IndexByte(line, '"')], 64)
		onBar := false
		for _, r := range regexp.MustCompile(`<rect class="datum"[^>]* x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)"`).FindAllStringSubmatch(page, -1) {
			x0, _ := strconv.ParseFloat(r[1], 64)
			w, _ := strconv.ParseFloat(r[2], 64)
			if x >= x0 && x <= x0+w && math.Abs(x-(x0+w/2)) < w/2*0.2+0.6 {
				onBar = true
			}
		}
		if !onBar {
			t.Errorf("mode %g µs: marker at x=%g is not on the middle of a bar", m.CenterUS, x)
		}
	}
}
