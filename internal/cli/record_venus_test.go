//go:build linux

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd"
)

// startVenusServer serves venusd in this (unrecorded) process until the test ends.
func startVenusServer(t *testing.T, listen string) string {
	t.Helper()
	srv, err := venusd.NewServer(venusd.ServerConfig{Listen: listen})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv.Addr()
}

// TestRecordVenusExact records venusd clients (the perflab binary running "venus run") over
// TCP and a unix socket, in baseline and coalesce+pipeline modes: the recorded calls and bytes
// of each direction equal the client's own counters exactly, over at least 100,000 messages
// for ping (for llm, thousands of frames of up to 120 kB), the EAGAIN calls too, and no other
// process appears.
func TestRecordVenusExact(t *testing.T) {
	requireRecord(t)
	tests := []struct {
		transport, mode, workload string
		args                      []string
		minCalls                  int64
	}{
		{"tcp", "baseline", "ping", []string{"--requests", "50000"}, 100000},
		{"unix", "baseline", "ping", []string{"--requests", "50000"}, 100000},
		{"tcp", "coalesce+pipeline", "ping", []string{"--requests", "100000"}, 100000},
		{"unix", "coalesce+pipeline", "ping", []string{"--requests", "100000"}, 100000},
		{"tcp", "baseline", "llm", []string{"--tokens", "64"}, 4000},
		{"unix", "coalesce+pipeline", "llm", []string{"--tokens", "64"}, 500},
	}
	for _, tc := range tests {
		if recordRaceBuild {
			// Fewer messages under -race; the run without it checks the full counts.
			tc.args, tc.minCalls = []string{"--requests", "5000"}, tc.minCalls/20
			if tc.workload == "llm" {
				tc.args, tc.minCalls = []string{"--tokens", "8"}, tc.minCalls*20/8
			}
		}
		t.Run(tc.transport+"_"+tc.mode+"_"+tc.workload, func(t *testing.T) {
			dir := t.TempDir()
			listen := "tcp://127.0.0.1:0"
			if tc.transport == "unix" {
				listen = "unix://" + filepath.Join(dir, "venus.sock")
			}
			addr := startVenusServer(t, listen)
			client := append([]string{"env", recordMainEnv + "=1", os.Args[0], "venus", "run", "--connect", addr,
				"--workload", tc.workload, "--mode", tc.mode, "--json", "--no-verify"}, tc.args...)
			rec, out, _, stdout, stderr := recordCmd(t, dir, append([]string{"--"}, client...)...)
			if err := rec.Run(); err != nil {
				t.Fatalf("record: %v; stderr %q", err, stderr.String())
			}
			// The client's JSON comes first on stdout, then record's summary.
			var res venusd.Result
			if err := json.NewDecoder(bytes.NewReader(stdout.Bytes())).Decode(&res); err != nil {
				t.Fatalf("client output %q: %v", stdout.String(), err)
			}
			f, err := trace.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Meta.PIDs) != 1 {
				t.Fatalf("meta pids %v", f.Meta.PIDs)
			}
			var sc, rc, sb, rb, eagain int64
			for _, e := range f.Events {
				if e.PID != f.Meta.PIDs[0] {
					t.Fatalf("event of pid %d; only the client %d was recorded", e.PID, f.Meta.PIDs[0])
				}
				switch {
				case e.Errno == 11:
					eagain++
				case e.Errno != 0:
				case e.Dir == trace.DirSend:
					sc, sb = sc+1, sb+e.Bytes
				case e.Dir == trace.DirRecv:
					rc, rb = rc+1, rb+e.Bytes
				}
			}
			tot := res.Totals
			got := fmt.Sprintf("send %d calls %d bytes, recv %d calls %d bytes", sc, sb, rc, rb)
			want := fmt.Sprintf("send %d calls %d bytes, recv %d calls %d bytes", tot.SendCalls, tot.BytesSent, tot.RecvCalls, tot.BytesRecv)
			if got != want {
				t.Errorf("recorded %s; the client counted %s", got, want)
			}
			if eagain != tot.EAGAIN {
				t.Errorf("recorded %d EAGAIN calls; the client counted %d", eagain, tot.EAGAIN)
			}
			if sc+rc < tc.minCalls {
				t.Errorf("only %d messages recorded, want at least %d", sc+rc, tc.minCalls)
			}
			if f.Lost[probes.LostSource] != 0 {
				t.Errorf("lost %v", f.Lost)
			}
			t.Logf("%s; EAGAIN recorded %d, counted %d", got, eagain, tot.EAGAIN)
		})
	}
}
