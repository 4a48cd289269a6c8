package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The HTML reports as a person sees them: each page is opened in headless Chromium, which
// writes a screenshot under build/e2e/ and the DOM it rendered. The test checks that every chart
// drew data, that the page logged no console message (no script error), and that it asked the
// network for nothing beyond its own file.
//
// It runs when Chromium is installed, and must run when PERFLAB_E2E=1 (then a missing Chromium
// fails the test). `make e2e` installs Debian's chromium package when it is missing.

// browser returns the Chromium to use, or skips (fails under PERFLAB_E2E=1) when there is none.
func browser(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PERFLAB_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("PERFLAB_E2E") == "1" {
		t.Fatal("PERFLAB_E2E=1 but no Chromium found (install Debian's chromium package, or set PERFLAB_CHROMIUM)")
	}
	t.Skip("no Chromium installed (apt-get install chromium, or run make e2e); set PERFLAB_E2E=1 to make this a failure")
	return ""
}

// page is one HTML report to check.
type page struct {
	name      string
	path      string
	minCharts int
	emptyOK   []string // charts that may be empty here, saying why
}

func TestHTMLReportsInBrowser(t *testing.T) {
	chromium := browser(t)
	shots := filepath.Join(repoRoot, "build", "e2e")
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	addr := startVenusd(t, dir)
	for _, m := range []string{"baseline", "coalesce+pipeline"} {
		mustPerflab(t, dir, "venus", "run", "--connect", addr, "--workload", "llm", "--tokens", "12",
			"--mode", m, "--delay", "200us", "--trace", m+".plt")
	}
	mustPerflab(t, dir, "analyze", "--format", "html", "-o", "analyze.html", "baseline.plt")
	mustPerflab(t, dir, "compare", "--format", "html", "-o", "compare.html", "baseline.plt", "coalesce+pipeline.plt")
	pages := []page{
		// One client with one request in flight: the batch model has a single N, and says so.
		{"analyze", filepath.Join(dir, "analyze.html"), 3, []string{"batch"}},
		{"compare", filepath.Join(dir, "compare.html"), 2, nil},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			html, err := os.ReadFile(p.path)
			if err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(shots, p.name+".png")
			dom, logs, netlogs := openInBrowser(t, chromium, p.path, shot)
			for _, problem := range pageProblems(string(html), dom, logs, netlogs, p.minCharts, p.emptyOK...) {
				t.Error(problem)
			}
			checkScreenshot(t, shot)
		})
	}
}

// A page that breaks every rule must be caught by every check: the checks are not vacuous.
func TestBrowserChecksCatchABadPage(t *testing.T) {
	chromium := browser(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.html")
	html := `<!doctype html><html><body><h1>bad</h1>
<svg class="chart" data-chart="empty" data-n="3" width="100" height="100"><text>no marks</text></svg>
<svg class="chart nodata" data-chart="missing" data-n="0" width="100" height="100"></svg>
<img src="https://example.invalid/x.png"><script>nosuchfunction();</script></body></html>`
	if err := os.WriteFile(bad, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	dom, logs, netlogs := openInBrowser(t, chromium, bad, filepath.Join(dir, "bad.png"))
	got := strings.Join(pageProblems(html, dom, logs, netlogs, 3), "\n")
	for _, want := range []string{
		"external reference", `chart "empty": data-n=3 but no data marks`, `chart "missing" drew no data`,
		"2 charts rendered, want at least 3", "console: ", "Uncaught ReferenceError", "the page requested https://example.invalid/x.png",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problem %q not reported; got:\n%s", want, got)
		}
	}
}

// openInBrowser loads file in a fresh headless Chromium twice: once for the screenshot, once for
// the rendered DOM. It returns the DOM, the browser's log and its network log (NetLog JSON).
func openInBrowser(t *testing.T, chromium, file, shot string) (dom, logs string, netlogs [][]byte) {
	t.Helper()
	url := "file://" + file
	runChromium := func(extra ...string) (string, string, []byte) {
		profile := t.TempDir()
		netlogPath := filepath.Join(profile, "netlog.json")
		args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
			"--disable-background-networking", "--disable-component-update", "--disable-sync",
			"--disable-default-apps", "--disable-extensions", "--user-data-dir=" + filepath.Join(profile, "profile"),
			// Any name the page might look up fails at once, so a fetch cannot succeed quietly.
			"--host-resolver-rules=MAP * ~NOTFOUND",
			"--enable-logging=stderr", "--log-level=0", "--v=0", "--log-net-log=" + netlogPath,
			"--window-size=1280,2400"}
		args = append(args, extra...)
		args = append(args, url)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, args...)
		cmd.Env = append(os.Environ(), "HOME="+profile)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %s: %v\n%s", strings.Join(extra, " "), err, tail(errb.String(), 2000))
		}
		nl, err := os.ReadFile(netlogPath)
		if err != nil {
			t.Fatalf("chromium wrote no network log: %v", err)
		}
		return out.String(), errb.String(), nl
	}
	_, logs1, nl1 := runChromium("--screenshot=" + shot)
	dom, logs2, nl2 := runChromium("--dump-dom")
	if _, err := os.Stat(shot); err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, tail(logs1, 2000))
	}
	t.Logf("screenshot: %s", shot)
	return dom, logs1 + logs2, [][]byte{nl1, nl2}
}

var (
	svgOpen  = regexp.MustCompile(`<svg\b[^>]*>`)
	attrRe   = regexp.MustCompile(`\b(class|data-chart|data-n)="([^"]*)"`)
	datumRe  = regexp.MustCompile(`<(path|rect|circle|line|polyline)\b[^>]*\bclass="[^"]*\bdatum\b[^"]*"[^>]*>`)
	pathDRe  = regexp.MustCompile(`\bd="([^"]*)"`)
	extRefRe = regexp.MustCompile(`(?i)(\b(src|href|action|poster|srcset)\s*=\s*["']?\s*(https?:)?//)|(url\(\s*["']?\s*(https?:)?//)|(@import)`)
)

// pageProblems lists what is wrong with a page: its HTML, the DOM Chromium rendered, the
// browser's log and its network log.
func pageProblems(html, dom, logs string, netlogs [][]byte, minCharts int, emptyOK ...string) []string {
	var out []string
	out = append(out, externalRefs(html)...)
	out = append(out, chartProblems(dom, minCharts, emptyOK...)...)
	out = append(out, consoleLines(logs)...)
	for _, nl := range netlogs {
		out = append(out, pageRequests(nl)...)
	}
	return out
}

// chartProblems checks that the rendered page has at least min charts and that every chart drew
// data marks: data-n > 0, class="datum" marks, each data path with at least two points.
// chartProblems lists charts that drew nothing, except those named in emptyOK, which may be
// empty when they say why ("no data: ...").
func chartProblems(dom string, min int, emptyOK ...string) []string {
	var out []string
	charts := 0
	for _, loc := range svgOpen.FindAllStringIndex(dom, -1) {
		tag := dom[loc[0]:loc[1]]
		attrs := map[string]string{}
		for _, m := range attrRe.FindAllStringSubmatch(tag, -1) {
			attrs[m[1]] = m[2]
		}
		if !strings.Contains(" "+attrs["class"]+" ", " chart ") {
			continue
		}
		charts++
		name := attrs["data-chart"]
		end := strings.Index(dom[loc[1]:], "</svg>")
		if end < 0 {
			out = append(out, fmt.Sprintf("chart %q: no </svg>", name))
			continue
		}
		body := dom[loc[1] : loc[1]+end]
		n, err := strconv.Atoi(attrs["data-n"])
		if err != nil || n <= 0 || strings.Contains(attrs["class"], "nodata") {
			if slices.Contains(emptyOK, name) && strings.Contains(body, "no data: ") {
				continue
			}
			out = append(out, fmt.Sprintf("chart %q drew no data (data-n=%q, class=%q)", name, attrs["data-n"], attrs["class"]))
			continue
		}
		marks := datumRe.FindAllString(body, -1)
		if len(marks) == 0 {
			out = append(out, fmt.Sprintf("chart %q: data-n=%d but no data marks in the SVG", name, n))
		}
		for _, mk := range marks {
			if d := pathDRe.FindStringSubmatch(mk); strings.HasPrefix(mk, "<path") && (d == nil || strings.Count(d[1], "L")+strings.Count(d[1], "H")+strings.Count(d[1], "V") < 1) {
				out = append(out, fmt.Sprintf("chart %q: a data path with fewer than two points: %.120s", name, mk))
			}
		}
	}
	if charts < min {
		out = append(out, fmt.Sprintf("%d charts rendered, want at least %d", charts, min))
	}
	return out
}

// consoleLines returns every console message the page logged (errors, uncaught exceptions):
// the reports have no script, so a console line means something went wrong.
func consoleLines(logs string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			out = append(out, "console: "+line)
		}
	}
	return out
}

// pageRequests returns the requests the page made (their network isolation key is the file://
// origin) for anything but a file: URL. The browser's own background requests have another key.
func pageRequests(netlog []byte) []string {
	var out []string
	var nl struct {
		Events []struct {
			Params map[string]any `json:"params"`
		} `json:"events"`
	}
	if err := json.Unmarshal(netlog, &nl); err != nil {
		// Chromium may leave the log unterminated when it exits; scan it as text then.
		re := regexp.MustCompile(`"network_isolation_key":"file://[^"]*"[^{}]*?"url":"([^"]*)"`)
		for _, m := range re.FindAllSubmatch(netlog, -1) {
			if !bytes.HasPrefix(m[1], []byte("file:")) {
				out = append(out, "the page requested "+string(m[1]))
			}
		}
		return out
	}
	for _, e := range nl.Events {
		nik, _ := e.Params["network_isolation_key"].(string)
		url, _ := e.Params["url"].(string)
		if url != "" && strings.HasPrefix(nik, "file://") && !strings.HasPrefix(url, "file:") {
			out = append(out, "the page requested "+url)
		}
	}
	return out
}

// externalRefs returns the places where the HTML names anything on another host.
func externalRefs(html string) []string {
	var out []string
	for _, loc := range extRefRe.FindAllStringIndex(html, -1) {
		out = append(out, fmt.Sprintf("external reference in the page: %q", html[max(0, loc[0]-20):min(len(html), loc[1]+60)]))
	}
	return out
}

// checkScreenshot checks the screenshot is the window's size and not blank: some pixels are
// far from the background.
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	b := img.Bounds()
	if b.Dx() != 1280 || b.Dy() != 2400 {
		t.Errorf("screenshot is %dx%d, want 1280x2400", b.Dx(), b.Dy())
	}
	inked, colored := 0, 0
	for y := b.Min.Y; y < b.Max.Y; y += 4 {
		for x := b.Min.X; x < b.Max.X; x += 4 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xc000 || g < 0xc000 || bl < 0xc000 {
				inked++
			}
			if absDiff(r, g) > 0x3000 || absDiff(g, bl) > 0x3000 {
				colored++
			}
		}
	}
	total := (b.Dx() / 4) * (b.Dy() / 4)
	if inked < total/200 {
		t.Errorf("screenshot looks blank: %d of %d sampled pixels inked", inked, total)
	}
	if colored == 0 {
		t.Errorf("screenshot has no coloured pixel: the charts' lines and bars did not paint")
	}
	t.Logf("screenshot %s: %.1f%% inked, %.1f%% coloured", filepath.Base(path), 100*float64(inked)/float64(total), 100*float64(colored)/float64(total))
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
