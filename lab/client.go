package lab

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ClientReport is what a closed-loop client said about its own run: its throughput and mean
// latency (Little's law needs both), and its percentiles when it gives them.
type ClientReport struct {
	Format         string  `json:"format"` // redis-benchmark, memtier, json
	Test           string  `json:"test,omitempty"`
	Requests       int64   `json:"requests,omitempty"` // when the client says (json)
	ThroughputPerS float64 `json:"throughput_per_s"`
	LatencyMeanUS  float64 `json:"latency_mean_us"`
	LatencyP50US   float64 `json:"latency_p50_us,omitempty"`
	LatencyP99US   float64 `json:"latency_p99_us,omitempty"`
	// LatencyStepUS is the resolution the client prints its latency with (redis-benchmark:
	// 1 µs), µs; 0 when unknown.
	LatencyStepUS float64 `json:"latency_step_us,omitempty"`
}

// maxClientOutput bounds the client output parsed (a benchmark's summary is a few lines).
const maxClientOutput = 1 << 20

// ParseClientOutput reads the summary a closed-loop client printed, in format "auto" (the
// first that matches), "redis-benchmark" (its --csv output: the header line and one row; with
// several tests, name one with test), "memtier" (memtier_benchmark's "Totals" row under its
// "Type Ops/sec ... Avg. Latency" header, in ms) or "json" (one object with throughput_per_s
// and latency_mean_us, and optionally requests, latency_p50_us, latency_p99_us: what any
// client can print).
func ParseClientOutput(out []byte, format, test string) (*ClientReport, error) {
	if len(out) > maxClientOutput {
		out = out[len(out)-maxClientOutput:] // the summary comes last
	}
	switch format {
	case "redis-benchmark":
		return parseRedisCSV(out, test)
	case "memtier":
		return parseMemtier(out)
	case "json":
		return parseClientJSON(out)
	case "auto", "":
		var errs []error
		for _, f := range []func() (*ClientReport, error){
			func() (*ClientReport, error) { return parseRedisCSV(out, test) },
			func() (*ClientReport, error) { return parseMemtier(out) },
			func() (*ClientReport, error) { return parseClientJSON(out) },
		} {
			r, err := f()
			if err == nil {
				return r, nil
			}
			errs = append(errs, err)
		}
		return nil, fmt.Errorf("client output: no known summary (redis-benchmark --csv, memtier, json): %w", errors.Join(errs...))
	}
	return nil, fmt.Errorf("client format %q: want auto, redis-benchmark, memtier or json", format)
}

func checkReport(r *ClientReport) (*ClientReport, error) {
	for _, v := range []float64{r.ThroughputPerS, r.LatencyMeanUS, r.LatencyP50US, r.LatencyP99US} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1e12 {
			return nil, fmt.Errorf("%s: value %v out of range", r.Format, v)
		}
	}
	if r.ThroughputPerS <= 0 || r.LatencyMeanUS <= 0 {
		return nil, fmt.Errorf("%s: throughput %v/s and mean latency %v µs must be positive", r.Format, r.ThroughputPerS, r.LatencyMeanUS)
	}
	return r, nil
}

// parseRedisCSV reads redis-benchmark --csv: "test","rps","avg_latency_ms",... then one row
// per test.
func parseRedisCSV(out []byte, test string) (*ClientReport, error) {
	i := bytes.Index(out, []byte(`"test","rps"`))
	if i < 0 {
		return nil, errors.New(`redis-benchmark: no "test","rps" header (run it with --csv)`)
	}
	rd := csv.NewReader(bytes.NewReader(out[i:]))
	rd.FieldsPerRecord = -1
	rows, err := rd.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark csv: %w", err)
	}
	head := rows[0]
	col := func(name string) int {
		for k, h := range head {
			if h == name {
				return k
			}
		}
		return -1
	}
	var pick []string
	var tests []string
	for _, r := range rows[1:] {
		if len(r) != len(head) {
			continue
		}
		tests = append(tests, r[0])
		if test == "" || strings.EqualFold(r[0], test) {
			if pick != nil && test == "" {
				return nil, fmt.Errorf("redis-benchmark: several tests (%s): run one (-t get) or name one", strings.Join(tests, ", "))
			}
			pick = r
		}
	}
	if pick == nil {
		return nil, fmt.Errorf("redis-benchmark: no row for test %q (tests: %s)", test, strings.Join(tests, ", "))
	}
	num := func(name string, scale float64) (float64, error) {
		k := col(name)
		if k < 0 {
			return 0, nil
		}
		v, err := strconv.ParseFloat(pick[k], 64)
		if err != nil {
			return 0, fmt.Errorf("redis-benchmark: %s %q: %w", name, pick[k], err)
		}
		return v * scale, nil
	}
	r := &ClientReport{Format: "redis-benchmark", Test: pick[0], LatencyStepUS: 1}
	for _, f := range []struct {
		name  string
		scale float64
		dst   *float64
	}{{"rps", 1, &r.ThroughputPerS}, {"avg_latency_ms", 1e3, &r.LatencyMeanUS}, {"p50_latency_ms", 1e3, &r.LatencyP50US}, {"p99_latency_ms", 1e3, &r.LatencyP99US}} {
		v, err := num(f.name, f.scale)
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	if col("avg_latency_ms") < 0 {
		return nil, errors.New("redis-benchmark: no avg_latency_ms column (redis-benchmark 6 or later prints it)")
	}
	return checkReport(r)
}

// parseMemtier reads memtier_benchmark's summary: a header line starting "Type" with
// "Ops/sec" and "Avg. Latency" (ms), and the "Totals" row.
func parseMemtier(out []byte) (*ClientReport, error) {
	var head []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "Type" {
			// "Avg. Latency" and "p50.00 Latency" are two words each: join them.
			head = nil
			for k := 0; k < len(f); k++ {
				if k+1 < len(f) && f[k+1] == "Latency" {
					head = append(head, f[k]+" Latency")
					k++
					continue
				}
				head = append(head, f[k])
			}
			continue
		}
		if f[0] != "Totals" || head == nil {
			continue
		}
		r := &ClientReport{Format: "memtier", Test: "Totals"}
		for k, h := range head {
			if k >= len(f) {
				break
			}
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil {
				continue
			}
			switch h {
			case "Ops/sec":
				r.ThroughputPerS = v
			case "Avg. Latency", "Latency":
				r.LatencyMeanUS = v * 1e3
			case "p50.00 Latency":
				r.LatencyP50US = v * 1e3
			case "p99.00 Latency":
				r.LatencyP99US = v * 1e3
			}
		}
		return checkReport(r)
	}
	return nil, errors.New(`memtier: no "Type ... Ops/sec ... Avg. Latency" header with a "Totals" row`)
}

// parseClientJSON reads the last line that is a JSON object with throughput_per_s.
func parseClientJSON(out []byte) (*ClientReport, error) {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for k := len(lines) - 1; k >= 0; k-- {
		l := strings.TrimSpace(lines[k])
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var r ClientReport
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return nil, fmt.Errorf("json: %w", err)
		}
		r.Format = "json"
		return checkReport(&r)
	}
	return nil, errors.New("json: no line holding a JSON object")
}
