package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/perflab/perflab/trace"
)

// countsTargetEnv makes the test binary a program that sends messages over a socket pair,
// closes one end and reads the end of file on the other.
const countsTargetEnv = "PERFLAB_CLI_COUNTS_TARGET"

func init() {
	if n := os.Getenv(countsTargetEnv); n != "" {
		if err := countsTarget(n); err != nil {
			fmt.Fprintln(os.Stderr, "target:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
}

func countsTarget(arg string) error {
	n, err := strconv.Atoi(arg)
	if err != nil {
		return err
	}
	sp, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	m := []byte("SLPV\x08\x00\x00\x00payload!")
	buf := make([]byte, len(m))
	c := targetCounts{PID: os.Getpid()}
	for i := 0; i < n; i++ {
		w, err := syscall.Write(sp[0], m)
		if err != nil {
			return err
		}
		c.SendCalls, c.SendBytes = c.SendCalls+1, c.SendBytes+int64(w)
		r, err := syscall.Read(sp[1], buf)
		if err != nil {
			return err
		}
		c.RecvCalls, c.RecvBytes = c.RecvCalls+1, c.RecvBytes+int64(r)
	}
	syscall.Close(sp[0])
	if r, err := syscall.Read(sp[1], buf); err != nil || r != 0 {
		return fmt.Errorf("want end of file, got %d bytes, %v", r, err)
	}
	syscall.Close(sp[1])
	return writeCounts(c)
}

// TestSameCountsEverywhere: record's summary, the trace's footer and analyze agree on the
// calls and the connections of a recording, and with what the program counted itself: the
// end-of-file read is no call anywhere, and a connection is counted once even though its
// record is written again when it closes.
func TestSameCountsEverywhere(t *testing.T) {
	requireRecord(t)
	dir := t.TempDir()
	out, counts := filepath.Join(dir, "rec.plt"), filepath.Join(dir, "counts.json")
	cmd := perflab(t, counts, "record", "-o", out, "--", "env", countsTargetEnv+"=200", recordMainEnv+"=0", os.Args[0])
	summary, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, summary)
	}
	c := readCounts(t, counts)
	num := func(re string) int {
		m := regexp.MustCompile(re).FindSubmatch(summary)
		if m == nil {
			t.Fatalf("summary has no %s:\n%s", re, summary)
		}
		v, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
		return v
	}
	sumSend, sumRecv, sumConns := num(`(?m)^\|\s*send\s*\|\s*([\d,]+)`), num(`(?m)^\|\s*recv\s*\|\s*([\d,]+)`), num(`(?m)^([\d,]+) connections`)
	if !regexp.MustCompile(`1 end-of-file reads?`).Match(summary) {
		t.Errorf("summary does not say it left the end-of-file read out:\n%s", summary)
	}
	f, err := trace.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, cn := range f.Connections {
		ids[cn.ID] = true
	}
	code, js, errs := runIn(t, "analyze", "--format", "json", out)
	if code != 0 {
		t.Fatalf("analyze: exit %d: %s", code, errs)
	}
	var a struct {
		Totals struct {
			Send struct{ Calls int } `json:"send"`
			Recv struct{ Calls int } `json:"recv"`
		} `json:"totals"`
		Connections []struct {
			ID uint64 `json:"id"`
		} `json:"connections"`
	}
	if err := json.Unmarshal([]byte(js), &a); err != nil {
		t.Fatal(err)
	}
	t.Logf("program %d/%d calls; summary %d/%d, %d connections; footer %d connections (%d records, %d ids); analyze %d/%d, %d connections",
		c.SendCalls, c.RecvCalls, sumSend, sumRecv, sumConns, f.Footer.Connections, len(f.Connections), len(ids), a.Totals.Send.Calls, a.Totals.Recv.Calls, len(a.Connections))
	if sumSend != c.SendCalls || sumRecv != c.RecvCalls || a.Totals.Send.Calls != c.SendCalls || a.Totals.Recv.Calls != c.RecvCalls {
		t.Errorf("calls send/recv: program %d/%d, record's summary %d/%d, analyze %d/%d",
			c.SendCalls, c.RecvCalls, sumSend, sumRecv, a.Totals.Send.Calls, a.Totals.Recv.Calls)
	}
	if f.Footer == nil || int(f.Footer.Connections) != len(ids) || sumConns != len(ids) || len(a.Connections) != len(ids) {
		t.Errorf("connections: footer %v, summary %d, analyze %d, distinct ids in the trace %d", f.Footer, sumConns, len(a.Connections), len(ids))
	}
}
