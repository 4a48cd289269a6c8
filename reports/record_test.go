package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/collectors"
	"github.com/perflab/perflab/internal/testutil"
	"github.com/perflab/perflab/trace"
)

// recordResult is what a two-connection recording of 2 s saw: one connection only sending, one
// only receiving with failed reads, three events lost, and the probe's measured cost.
func recordResult() *collectors.Result {
	conn := func(id uint64, remote string) trace.Connection {
		return trace.Connection{ID: id, Family: trace.FamilyTCP, PID: 7, Local: "127.0.0.1:5556", Remote: remote}
	}
	return &collectors.Result{
		Elapsed: 2 * time.Second, Events: 1000, Lost: map[string]uint64{"ringbuf": 3},
		Send: collectors.DirStats{Calls: 499, Bytes: 249500, Empty: 1},
		Recv: collectors.DirStats{Calls: 400, Bytes: 199600, Errors: map[uint32]uint64{11: 100}},
		Conns: []collectors.ConnStats{
			{Conn: conn(1, "127.0.0.1:40001"), Send: collectors.DirStats{Calls: 499, Bytes: 249500}},
			{Conn: conn(2, "127.0.0.1:40002"), Recv: collectors.DirStats{Calls: 400, Bytes: 199600, Errors: map[uint32]uint64{11: 100}}},
		},
		Stats: map[string]int64{"probe_events": 1000, "probe_stats_events": 400, "probe_ns_per_event": 310,
			"probe_other_ns_per_call": 41, "probe_other_ns_per_switch": 9},
	}
}

func TestRecordGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Record(&b, recordResult(), 10); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, "record.txt", b.Bytes())
}

// TestRecordBusiest: past maxConns, the busiest connections are listed and the title says so.
func TestRecordBusiest(t *testing.T) {
	var b bytes.Buffer
	if err := Record(&b, recordResult(), 1); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "2 connections (the 1 busiest)") || !strings.Contains(out, "127.0.0.1:40001") || strings.Contains(out, "127.0.0.1:40002") {
		t.Errorf("want only the busiest connection (499 calls):\n%s", out)
	}
	b.Reset()
	if err := Record(&b, &collectors.Result{}, 10); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "0 connections\n") || strings.Contains(out, "| id") || strings.Contains(out, "probe cost") {
		t.Errorf("an empty recording: want no connection table and no probe cost:\n%s", out)
	}
}
