package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// perflab bench as a script uses it: --json with the contract's fields (the run queue split
// between the clients' process and the server's), the traces and bench.json in -o DIR, Little's
// law within 10% at every point; bad flags exit 2 with one line.
func TestBenchJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "sweep")
	r := mustPerflab(t, dir, "bench", "--transports", "unix,tcp", "--clients", "1,3", "--depth", "1,2", "--duration", "150ms", "--json", "-o", out)
	var res struct {
		Schema string `json:"schema"`
		Points []struct {
			Transport        string             `json:"transport"`
			Mode             string             `json:"mode"`
			Clients          int                `json:"clients"`
			Depth            int                `json:"depth"`
			ThroughputPerS   float64            `json:"throughput_per_s"`
			RTTUS            map[string]float64 `json:"rtt_us"`
			InflightMean     float64            `json:"inflight_mean"`
			RequestsPerCycle float64            `json:"requests_per_cycle"`
			Trace            string             `json:"trace"`
			RunQueue         *struct {
				Separate bool     `json:"separate"`
				USPerRT  *float64 `json:"us_per_rt"`
				Client   *float64 `json:"client_us_per_rt"`
				Server   *float64 `json:"server_us_per_rt"`
			} `json:"runqueue"`
		} `json:"points"`
		BatchFit *struct {
			TFixedUS  float64    `json:"t_fixed_us"`
			TPerReqUS float64    `json:"t_per_req_us"`
			TFixedCI  [2]float64 `json:"t_fixed_ci_us"`
		} `json:"batch_fit"`
		LittlesLaw []struct {
			Label string  `json:"label"`
			Error float64 `json:"error"`
		} `json:"littles_law"`
		Series []json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, r.stdout)
	}
	if res.Schema != "perflab.bench/v1" || len(res.Points) != 8 || len(res.Series) != 4 || res.BatchFit == nil {
		t.Fatalf("schema %q, %d points, %d series, fit %v", res.Schema, len(res.Points), len(res.Series), res.BatchFit)
	}
	depth1 := map[string]float64{} // in flight at depth 1, by transport and clients
	for _, p := range res.Points {
		if p.Depth == 1 {
			depth1[fmt.Sprint(p.Transport, p.Clients)] = p.InflightMean
		}
	}
	for _, p := range res.Points {
		if p.ThroughputPerS <= 0 || p.RTTUS["p50"] <= 0 || p.RTTUS["mean"] <= 0 || p.RTTUS["p99"] < p.RTTUS["p50"] || p.InflightMean <= 0 || p.RequestsPerCycle < 1 {
			t.Errorf("point %+v", p)
		}
		// Depth 2 pipelines: more requests in flight than clients, or at least more than the same
		// clients kept at depth 1 (on a loaded machine the clients' own scheduling gaps can
		// hold both under the client count).
		if d1 := depth1[fmt.Sprint(p.Transport, p.Clients)]; p.Depth == 2 && p.InflightMean <= float64(p.Clients) && p.InflightMean <= d1 {
			t.Errorf("%s c%d depth 2: %.2f in flight, want more than %d clients or than depth 1's %.2f", p.Transport, p.Clients, p.InflightMean, p.Clients, d1)
		}
		if _, err := os.Stat(p.Trace); err != nil {
			t.Errorf("trace of %s c%d: %v", p.Transport, p.Clients, err)
		}
		// The server ran in a process of its own, and the run queue is split by side.
		if rq := p.RunQueue; rq == nil || !rq.Separate || rq.USPerRT == nil || rq.Client == nil || rq.Server == nil {
			t.Errorf("%s c%d: run queue %+v, want it split between the clients' and the server's processes", p.Transport, p.Clients, rq)
		}
	}
	if len(res.LittlesLaw) != 16 {
		t.Errorf("%d Little's-law rows, want 16 (clients and trace per point)", len(res.LittlesLaw))
	}
	for _, l := range res.LittlesLaw {
		if l.Error > 0.1 || l.Error < -0.1 {
			t.Errorf("%s: Little's law off by %.1f%%", l.Label, 100*l.Error)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "bench.json")); err != nil {
		t.Errorf("bench.json not kept: %v", err)
	}
	// The keep trace of a point is a trace analyze reads.
	mustPerflab(t, dir, "analyze", res.Points[0].Trace)
}

func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"--transports", "udp"},
		{"--clients", "0"},
		{"--clients", "1,x"},
		{"--depth", "0"},
		{"--modes", "fast"},
		{"--duration", "-1s"},
		{"--loop", "threads"},
		{"--clients", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26", "--depth", "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20", "--transports", "tcp,unix"},
		{"extra"},
	} {
		r := perflabCmd(t, dir, append([]string{"bench"}, args...)...)
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.HasPrefix(lines[0], "perflab bench: ") {
			t.Errorf("bench %v: exit %d, stderr %q; want exit 2 and one line", args, r.code, r.stderr)
		}
	}
}
