// Package duckdb checks docs/sql.md in a real DuckDB: every SQL block of the page runs as
// written over the Parquet tables that `perflab export --format parquet` writes for ten venusd
// recordings of the four modes, and each figure the queries give equals the one of
// `perflab analyze --format json` for the same traces. It is a module of its own so that the
// DuckDB driver (cgo, a large static library) is built only by `make e2e`.
package duckdb

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// run runs perflab with args and returns its stdout.
func run(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perflab %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// summary is the part of `perflab analyze --format json` the queries reproduce.
type summary struct {
	Traces   []string `json:"traces"`
	Commands []struct {
		Protocol, Name, Direction, Kind string
		ID                              int64 `json:"id"`
		RTT                             *struct {
			P50, P90, P99, Max float64
			N                  int64
		} `json:"rtt_us"`
	} `json:"commands"`
	RoundTrips struct {
		Client int64                      `json:"client"`
		RTT    struct{ P50, P99 float64 } `json:"rtt_us"`
	} `json:"round_trips"`
	Units []struct {
		Name              string
		Count             int64
		MessagesPerUnit   float64 `json:"messages_per_unit"`
		RequestsPerUnit   float64 `json:"requests_per_unit"`
		RepliesPerUnit    float64 `json:"replies_per_unit"`
		RoundTripsPerUnit float64 `json:"round_trips_per_unit"`
		BytesSentPerUnit  float64 `json:"bytes_sent_per_unit"`
		BytesRecvPerUnit  float64 `json:"bytes_recv_per_unit"`
	} `json:"units"`
	InFlight *struct{ Mean float64 } `json:"inflight"`
}

func analyze(t *testing.T, bin string, paths ...string) summary {
	t.Helper()
	var s summary
	if err := json.Unmarshal(run(t, bin, append([]string{"analyze", "--format", "json"}, paths...)...), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// same reports whether a figure of SQL equals analyze's (both are rounded the same way; the
// tolerance only absorbs the last bit of a float printed in JSON).
func same(sql, json float64) bool {
	return math.Abs(sql-json) <= 1e-9*math.Max(1, math.Abs(json))
}

func TestSQLAgreesWithAnalyze(t *testing.T) {
	if os.Getenv("PERFLAB_E2E") != "1" {
		t.Skip("needs PERFLAB_E2E=1 (make e2e): records venusd runs and loads DuckDB")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "perflab")
	build := exec.Command("go", "build", "-o", bin, "./cmd/perflab")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build perflab: %v: %s", err, out)
	}

	// a venusd server on a unix socket of our own, for ten recorded runs of the four modes
	sock := filepath.Join(dir, "venus.sock")
	srv := exec.Command(bin, "venus", "serve", "--listen", "unix://"+sock)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("venus serve did not listen")
		}
		time.Sleep(50 * time.Millisecond)
	}
	modes := []string{"baseline", "baseline", "baseline", "coalesce", "coalesce", "coalesce",
		"pipeline", "pipeline", "coalesce+pipeline", "coalesce+pipeline"}
	byMode := map[string][]string{}
	runs := filepath.Join(dir, "runs")
	for i, m := range modes {
		name := fmt.Sprintf("%02d-%s", i, strings.ReplaceAll(m, "+", "-"))
		tr := filepath.Join(dir, name+".plt")
		run(t, bin, "venus", "run", "--connect", "unix://"+sock, "--workload", "llm", "--tokens", "20",
			"--mode", m, "--trace", tr)
		run(t, bin, "export", "--format", "parquet", "-o", filepath.Join(runs, name), "--label", "mode="+m, tr)
		byMode[m] = append(byMode[m], tr)
	}

	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // views live in the one connection's catalog
	doc, err := os.ReadFile(filepath.Join(root, "docs", "sql.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 8 {
		t.Fatalf("docs/sql.md has %d sql blocks", len(blocks))
	}
	for _, b := range blocks {
		text := strings.ReplaceAll(b[1], "'runs/*/", "'"+runs+"/*/")
		for _, stmt := range strings.Split(text, ";\n") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := db.Exec(stmt); err != nil {
				t.Fatalf("docs/sql.md: %v\n%s", err, stmt)
			}
		}
	}
	files := map[string]string{} // trace_id → file
	rows, err := db.Query(`SELECT trace_id, file FROM traces`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, f string
		if err := rows.Scan(&id, &f); err != nil {
			t.Fatal(err)
		}
		files[id] = f
	}
	rows.Close()
	if len(files) != len(modes) {
		t.Fatalf("%d traces in the tables, want %d", len(files), len(modes))
	}

	checked := 0
	for id, file := range files {
		s := analyze(t, bin, filepath.Join(dir, file))
		// RTT percentiles per command
		type key struct {
			proto, name string
			cmd         int64
		}
		got := map[key][5]float64{}
		rows, err := db.Query(`SELECT protocol, name, command, round_trips, p50_us, p90_us, p99_us, max_us FROM rtt_by_command WHERE trace_id = ?`, id)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k key
			var v [5]float64
			if err := rows.Scan(&k.proto, &k.name, &k.cmd, &v[0], &v[1], &v[2], &v[3], &v[4]); err != nil {
				t.Fatal(err)
			}
			got[k] = v
		}
		rows.Close()
		n := 0
		for _, c := range s.Commands {
			if c.Direction != "recv" || c.Kind != "reply" || c.RTT == nil {
				continue
			}
			n++
			v, ok := got[key{c.Protocol, c.Name, c.ID}]
			want := [5]float64{float64(c.RTT.N), c.RTT.P50, c.RTT.P90, c.RTT.P99, c.RTT.Max}
			for i := range want {
				if !ok || !same(v[i], want[i]) {
					t.Errorf("%s %s: SQL n, p50, p90, p99, max %v, analyze %v", file, c.Name, v, want)
					break
				}
			}
			checked++
		}
		if n == 0 || n != len(got) {
			t.Errorf("%s: %d commands with round trips in SQL, %d in analyze", file, len(got), n)
		}
		// per unit
		if len(s.Units) != 1 {
			t.Fatalf("%s: analyze has %d units", file, len(s.Units))
		}
		u := s.Units[0]
		var units int64
		var f [6]float64
		err = db.QueryRow(`SELECT units, messages_per_unit, requests_per_unit, replies_per_unit, round_trips_per_unit,
			bytes_sent_per_unit, bytes_recv_per_unit FROM unit_figures WHERE trace_id = ?`, id).Scan(&units, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5])
		if err != nil {
			t.Fatal(err)
		}
		want := [6]float64{u.MessagesPerUnit, u.RequestsPerUnit, u.RepliesPerUnit, u.RoundTripsPerUnit, u.BytesSentPerUnit, u.BytesRecvPerUnit}
		for i := range want {
			if units != u.Count || !same(f[i], want[i]) {
				t.Errorf("%s: SQL per unit %d %v, analyze %d %v", file, units, f, u.Count, want)
				break
			}
		}
		// in flight
		var mean float64
		if err := db.QueryRow(`SELECT inflight_mean FROM inflight WHERE trace_id = ?`, id).Scan(&mean); err != nil {
			t.Fatal(err)
		}
		if s.InFlight == nil || !same(mean, s.InFlight.Mean) {
			t.Errorf("%s: SQL in flight %v, analyze %+v", file, mean, s.InFlight)
		}
		checked++
	}

	// the fleet query: each mode's pooled figures are analyze's of the mode's traces together
	rows, err = db.Query(`SELECT mode, traces, tokens, round_trips_per_token, bytes_sent_per_token, round_trips,
		rtt_p50_us, rtt_p99_us, inflight_mean FROM fleet_by_mode ORDER BY mode`)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for rows.Next() {
		var mode string
		var traces, tokens, rts int64
		var rtpt, bspt, p50, p99, infl float64
		if err := rows.Scan(&mode, &traces, &tokens, &rtpt, &bspt, &rts, &p50, &p99, &infl); err != nil {
			t.Fatal(err)
		}
		seen++
		paths := byMode[mode]
		pooled := analyze(t, bin, paths...)
		var wantTokens int64
		var wantRTPT, wantBSPT float64
		for _, p := range paths {
			u := analyze(t, bin, p).Units[0]
			wantTokens += u.Count
			wantRTPT += u.RoundTripsPerUnit / float64(len(paths))
			wantBSPT += u.BytesSentPerUnit / float64(len(paths))
		}
		if traces != int64(len(paths)) || tokens != wantTokens || !same(rtpt, wantRTPT) || !same(bspt, wantBSPT) ||
			rts != pooled.RoundTrips.Client || !same(p50, pooled.RoundTrips.RTT.P50) || !same(p99, pooled.RoundTrips.RTT.P99) ||
			pooled.InFlight == nil || !same(infl, pooled.InFlight.Mean) {
			t.Errorf("mode %s: SQL traces %d tokens %d rt/token %v bytes/token %v round trips %d p50 %v p99 %v in flight %v; "+
				"analyze %d %d %v %v %d %v %v %+v", mode, traces, tokens, rtpt, bspt, rts, p50, p99, infl,
				len(paths), wantTokens, wantRTPT, wantBSPT, pooled.RoundTrips.Client, pooled.RoundTrips.RTT.P50, pooled.RoundTrips.RTT.P99, pooled.InFlight)
		}
		t.Logf("mode %s: %d traces, %d tokens, %.3f round trips/token, %d round trips (p50 %.3f µs, p99 %.3f µs), %.3f in flight",
			mode, traces, tokens, rtpt, rts, p50, p99, infl)
	}
	rows.Close()
	if seen != len(byMode) {
		t.Errorf("fleet query: %d modes, want %d", seen, len(byMode))
	}
	t.Logf("%d per-trace figures checked against analyze", checked)
}
