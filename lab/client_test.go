package lab

import (
	"math"
	"strings"
	"testing"
)

const redisCSV = `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"GET","41666.67","0.034","0.016","0.039","0.047","0.071","0.095"
`

const memtierOut = `ALL STATS
============================================================================================================================
Type         Ops/sec     Hits/sec   Misses/sec    Avg. Latency     p50 Latency     p99 Latency   p99.9 Latency       KB/sec 
----------------------------------------------------------------------------------------------------------------------------
Sets         1234.56          ---          ---         0.41200         0.39900         0.83100         1.20700        95.11 
Gets        12345.67     12345.67         0.00         0.40100         0.39100         0.81500         1.11900       480.20 
Totals      13580.23     12345.67         0.00         0.40200         0.39100         0.81500         1.11900       575.31 
`

func TestParseClientOutput(t *testing.T) {
	for _, tc := range []struct {
		name, out, format, test string
		rps, mean               float64
		err                     string
	}{
		{"redis csv", "some progress\r" + redisCSV, "auto", "", 41666.67, 34, ""},
		{"redis csv named", `"test","rps","avg_latency_ms"` + "\n" + `"SET","100","1.000"` + "\n" + `"GET","200","0.500"` + "\n", "redis-benchmark", "get", 200, 500, ""},
		{"redis csv two tests", `"test","rps","avg_latency_ms"` + "\n" + `"SET","100","1.000"` + "\n" + `"GET","200","0.500"` + "\n", "redis-benchmark", "", 0, 0, "several tests"},
		{"redis without csv", "GET: 17391.30 requests per second, p50=0.039 msec", "redis-benchmark", "", 0, 0, "--csv"},
		{"memtier", memtierOut, "auto", "", 13580.23, 402, ""},
		{"json", "warming up\n" + `{"requests": 1000, "throughput_per_s": 5000, "latency_mean_us": 200}` + "\n", "json", "", 5000, 200, ""},
		{"json negative", `{"throughput_per_s": -5, "latency_mean_us": 200}`, "json", "", 0, 0, "out of range"},
		{"json zero", `{"throughput_per_s": 0, "latency_mean_us": 200}`, "json", "", 0, 0, "positive"},
		{"nothing", "hello", "auto", "", 0, 0, "no known summary"},
		{"bad format", "", "xml", "", 0, 0, "want auto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseClientOutput([]byte(tc.out), tc.format, tc.test)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.ThroughputPerS-tc.rps) > 1e-6 || math.Abs(r.LatencyMeanUS-tc.mean) > 1e-6 {
				t.Errorf("throughput %v mean %v, want %v %v", r.ThroughputPerS, r.LatencyMeanUS, tc.rps, tc.mean)
			}
		})
	}
}

func FuzzParseClientOutput(f *testing.F) {
	f.Add([]byte(redisCSV))
	f.Add([]byte(memtierOut))
	f.Add([]byte(`{"throughput_per_s": 5000, "latency_mean_us": 200}`))
	f.Add([]byte(`"test","rps"` + "\n\"a\",\"x\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseClientOutput(b, "auto", "")
		if err == nil && (r.ThroughputPerS <= 0 || r.LatencyMeanUS <= 0 || math.IsNaN(r.ThroughputPerS)) {
			t.Fatalf("accepted %+v", r)
		}
	})
}
