package analyzers

import (
	"encoding/json"
	"math/rand"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/perflab/perflab/fixtures"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// TestSpillListOrder checks that a list spilled to its file under a tiny budget yields what it
// was given, in order, pass after pass, and that the newest entry's pointer stays writable.
func TestSpillListOrder(t *testing.T) {
	b := &recBudget{limit: 1}
	l := spillList[interval]{budget: b}
	const n = 3*chunkLen + 1000
	for i := range n {
		p := l.add(interval{int64(i), 0})
		p.to = int64(2 * i) // written after add, as answered() does
	}
	if l.len() != n || l.nFile == 0 {
		t.Fatalf("len %d, in file %d: want %d, some in the file", l.len(), l.nFile, n)
	}
	for pass := range 2 {
		i := 0
		for iv := range l.all() {
			if iv.from != int64(i) || iv.to != int64(2*i) {
				t.Fatalf("pass %d: entry %d is %+v", pass, i, *iv)
			}
			i++
		}
		if i != n {
			t.Fatalf("pass %d: %d entries, want %d", pass, i, n)
		}
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	l.reset()
	if b.used != 0 || l.len() != 0 || l.file != nil {
		t.Fatalf("after reset: used %d, len %d, file %v", b.used, l.len(), l.file)
	}
}

// TestSpillListPassEnds stops passes over a spilled list early, in its file's first block, at
// a block's end and in its memory, and makes one pass whose file reads fail: each stops where it
// was stopped, leaves no goroutine behind, and a failed read ends the pass with the error kept.
func TestSpillListPassEnds(t *testing.T) {
	b := &recBudget{limit: 1}
	l := spillList[interval]{budget: b}
	const n = 4*chunkLen + 100
	for i := range n {
		l.add(interval{int64(i), 0})
	}
	if l.nFile < 3*chunkLen {
		t.Fatalf("%d entries in the file, want at least %d", l.nFile, 3*chunkLen)
	}
	before := runtime.NumGoroutine()
	for _, stop := range []int{0, 10, chunkLen - 1, chunkLen, 2*chunkLen + 5, l.nFile + 3} {
		i := 0
		for iv := range l.all() {
			if iv.from != int64(i) {
				t.Fatalf("stop %d: entry %d is %+v", stop, i, *iv)
			}
			if i == stop {
				break
			}
			i++
		}
		if i != stop {
			t.Fatalf("stopped at %d, want %d", i, stop)
		}
		if g := runtime.NumGoroutine(); g > before {
			t.Fatalf("stop %d: %d goroutines after the pass, %d before", stop, g, before)
		}
	}
	l.file.Close() // every read of the next pass fails
	got := 0
	for range l.all() {
		got++
	}
	if got != 0 || b.readErr == nil || !strings.Contains(b.readErr.Error(), "read spill file") {
		t.Fatalf("a pass over a closed file gave %d entries, error %v; want none and the read error", got, b.readErr)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Fatalf("%d goroutines after the failed pass, %d before", g, before)
	}
	l.file = nil
	l.reset()
}

// TestSpillListReuse holds two lists sharing a budget past it: the blocks written to the file
// are used again (no allocation per block once both lists have spilled), the memory counted
// stays within the budget and a block, and every entry comes back in order.
func TestSpillListReuse(t *testing.T) {
	const limit = 64 << 10
	b := &recBudget{limit: limit}
	a := spillList[interval]{budget: b}
	r := spillList[msgRec]{budget: b}
	block := max(int64(unsafe.Sizeof(msgRec{})), int64(unsafe.Sizeof(interval{}))) * min(chunkLen, limit/8/int64(unsafe.Sizeof(interval{})))
	i := 0
	add := func(k int) {
		for range k {
			a.add(interval{int64(i), int64(2 * i)})
			r.add(msgRec{ts: int64(i), size: uint32(i)})
			i++
			if b.used > limit+block {
				t.Fatalf("after %d entries: %d bytes counted, budget %d", i, b.used, limit)
			}
		}
	}
	add(20_000) // both lists past the budget, their first blocks spilled
	if a.nFile == 0 || r.nFile == 0 {
		t.Fatalf("in the files: %d and %d, want some of each", a.nFile, r.nFile)
	}
	if allocs := testing.AllocsPerRun(10, func() { add(2_000) }); allocs > 0.5 {
		t.Errorf("%.1f allocations per 2,000 entries of each list past the budget, want none (blocks reused)", allocs)
	}
	k := 0
	for iv := range a.all() {
		if iv.from != int64(k) || iv.to != int64(2*k) {
			t.Fatalf("interval %d is %+v", k, *iv)
		}
		k++
	}
	k = 0
	for m := range r.all() {
		if m.ts != int64(k) || m.size != uint32(k) {
			t.Fatalf("record %d is %+v", k, *m)
		}
		k++
	}
	if k != i || b.err != nil || b.readErr != nil {
		t.Fatalf("%d records of %d; errors %v, %v", k, i, b.err, b.readErr)
	}
	a.reset()
	r.reset()
	if b.used != 0 {
		t.Fatalf("after reset: %d bytes still counted", b.used)
	}
}

// summaryJSON analyzes ins with opt and returns the Summary as JSON and the analyzer.
func summaryJSON(t *testing.T, paths []string, opt Options) (string, *analyzer) {
	t.Helper()
	a, err := analyze(protocol.Files(paths, nil), opt, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.MarshalIndent(a.s, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(j), a
}

// TestBoundedMemorySameResult analyzes real and synthetic traces with a record memory of one
// byte (so that every record but the newest blocks goes through the temporary file) and with
// no limit, and checks that the Summaries are the same, that the files were used, and that
// the records held in memory never exceeded the newest two blocks of each list.
func TestBoundedMemorySameResult(t *testing.T) {
	real := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, filepath.Join(realDir, n))
		}
		return out
	}
	venus := func(src trace.Source, tokens int) string {
		return writeTrace(t, "venus-"+src.String()+"-"+strconv.Itoa(tokens)+".plt", fixtures.Meta(src.String(), "venus"), func(w *trace.Writer) error {
			return fixtures.Venus(w, fixtures.VenusOptions{Tokens: tokens, Uploads: 8, Source: src})
		})
	}
	tracer, ebpf := venus(trace.SourceTracer, 600), venus(trace.SourceEBPF, 600)
	cases := []struct {
		name  string
		paths []string
		opt   Options
		spill bool // the case is long enough to spill
	}{
		{"llama client", real("llamacpp/client-default.plt"), Options{}, true},
		{"llama server", real("llamacpp/server-default.plt"), Options{}, true},
		{"llama four", real("llamacpp/client-default.plt", "llamacpp/server-default.plt", "llamacpp/client-fitoff.plt", "llamacpp/server-fitoff.plt"), Options{}, true},
		{"llama unit command", real("llamacpp/client-fitoff.plt"), Options{Protocol: "ggml-rpc", UnitCommands: "GRAPH_COMPUTE"}, true},
		{"venus plus client", real("venusplus/client-phase9.plt"), Options{}, false},
		{"venus plus server", real("venusplus/server-phase9.plt"), Options{}, false},
		{"venus plus both", real("venusplus/client-phase2.plt", "venusplus/server-phase2.plt"), Options{}, false},
		{"venus plus unit command", real("venusplus/client-phase9.plt"), Options{UnitCommands: "vkQueueSubmit"}, false},
		{"tracer", []string{tracer}, Options{}, true},
		{"ebpf", []string{ebpf}, Options{}, true},
		{"ebpf, tracer's markers", []string{ebpf}, Options{Markers: tracer}, true},
		{"ebpf, no markers, unit command", []string{ebpf}, Options{Markers: fixturePath(t, "traces/pingpong.plt"), UnitCommands: "vkWaitForFences"}, true},
		{"pingpong", []string{fixturePath(t, "traces/pingpong.plt")}, Options{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unbounded := c.opt
			unbounded.RecordMemory = -1
			want, wa := summaryJSON(t, c.paths, unbounded)
			if wa.budget.spilled != 0 {
				t.Fatalf("no limit, yet %d bytes spilled", wa.budget.spilled)
			}
			tight := c.opt
			tight.RecordMemory = 1
			got, ga := summaryJSON(t, c.paths, tight)
			if got != want {
				t.Errorf("record memory 1 B: Summary differs from the unbounded one\n%s", firstDiff(got, want))
			}
			if c.spill && ga.budget.spilled == 0 {
				t.Errorf("record memory 1 B: nothing spilled")
			}
			// each of the three lists keeps at most its two newest blocks, of 64 entries under
			// so small a budget
			maxBlock := 64 * int64(unsafe.Sizeof(msgRec{}))
			if ga.budget.peak > 3*2*maxBlock {
				t.Errorf("record memory 1 B: %d bytes of records in memory at the peak, want at most %d", ga.budget.peak, 3*2*maxBlock)
			}
			t.Logf("spilled %d bytes; peak in memory %d bytes (unbounded: %d)", ga.budget.spilled, ga.budget.peak, wa.budget.peak)
		})
	}
}

// firstDiff returns the lines around the first line where got and want differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return "line " + strconv.Itoa(i+1) + ": got " + g[i] + ", want " + w[i]
		}
	}
	return "lengths " + strconv.Itoa(len(g)) + " and " + strconv.Itoa(len(w))
}

// commandUnitsAll is the reference cut of units, over all the records at once (how analyze
// cut them when it kept every record): commandUnits must give the same units in one pass.
func commandUnitsAll(rs []msgRec, opener uint8, cmdSig func(uint32) string) []cmdUnit {
	var openers []int
	for i, r := range rs {
		if r.kind&opener != 0 {
			openers = append(openers, i)
		}
	}
	if len(openers) == 0 {
		return nil
	}
	start := 0
	for j := openers[0] - 1; j >= 0; j-- {
		if completes(rs[j]) {
			start = j + 1
			break
		}
	}
	var units []cmdUnit
	for k, o := range openers {
		next := len(rs)
		if k+1 < len(openers) {
			next = openers[k+1]
		}
		end := -1
		for j := o + 1; j < next; j++ {
			if completes(rs[j]) {
				end = j
				break
			}
		}
		if end < 0 {
			if k+1 == len(openers) {
				break
			}
			end = next - 1
		}
		u := cmdUnit{to: rs[end].ts}
		if start > 0 {
			u.from = rs[start-1].ts
		} else {
			u.from = rs[start].ts - 1
		}
		var sig strings.Builder
		for j := start; j <= end; j++ {
			u.acc.add(rs[j])
			if rs[j].kind&(recReply|recRTEvent) == 0 {
				sig.WriteString(cmdSig(rs[j].cmd))
				sig.WriteByte(0)
			}
		}
		u.sig = sig.String()
		units = append(units, u)
		start = end + 1
	}
	return units
}

// TestCommandUnitsOnePass compares the one-pass cut of units with the reference on random
// sequences of requests, replies, tracer round trips and unit commands of several sides.
func TestCommandUnitsOnePass(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	sig := func(c uint32) string { return "c" + strconv.Itoa(int(c)) }
	for round := range 2000 {
		n := rng.Intn(60)
		var rs []msgRec
		ts := int64(100)
		for range n {
			ts += int64(rng.Intn(5))
			r := msgRec{ts: ts, size: uint32(rng.Intn(100)), cmd: uint32(rng.Intn(4)), busy: uint32(rng.Intn(9)), proc: uint16(rng.Intn(3))}
			switch rng.Intn(6) {
			case 0:
				r.kind = recSend | recUnit
			case 1:
				r.kind = recUnitRecv
			case 2:
				r.kind, r.rts = recReply, uint8(1+rng.Intn(2))
			case 3:
				r.kind = recRTEvent
			case 4:
				r.kind = recReply
			default:
				r.kind = recSend
			}
			rs = append(rs, r)
		}
		procs := make([]bool, maxProcs+1)
		procs[0], procs[2] = true, rng.Intn(2) == 0
		var mine []msgRec
		for _, r := range rs {
			if procs[r.proc] {
				mine = append(mine, r)
			}
		}
		for _, opener := range []uint8{recUnit, recUnitRecv} {
			want := commandUnitsAll(mine, opener, sig)
			got := commandUnits(slices.Values(ptrs(rs)), procs, opener, sig)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d, opener %d:\n got %+v\nwant %+v", round, opener, got, want)
			}
		}
	}
}

func ptrs(rs []msgRec) []*msgRec {
	out := make([]*msgRec, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

// TestUnitWaits checks that the one-pass wait of units in time order is blockedIn's, unit by
// unit, with overlapping blocked intervals (the same time counted once per interval).
func TestUnitWaits(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for round := range 500 {
		a := &analyzer{}
		a.blocks.budget = &recBudget{limit: 1}
		for range rng.Intn(300) {
			from := int64(rng.Intn(1000))
			a.blocks.add(interval{from, from + int64(1+rng.Intn(80))})
		}
		var units []cmdUnit
		at := int64(rng.Intn(50))
		for range rng.Intn(40) {
			next := at + int64(rng.Intn(60))
			units = append(units, cmdUnit{from: at, to: next})
			at = next
		}
		if round%5 == 0 && len(units) > 2 { // out of order: the unit-by-unit way
			units[0], units[1] = units[1], units[0]
		}
		a.unitWaits(units)
		for k, u := range units {
			if w := a.blockedIn(u.from, u.to); u.wait != w {
				t.Fatalf("round %d, unit %d [%d, %d): wait %d, blockedIn %d", round, k, u.from, u.to, u.wait, w)
			}
		}
	}
}

// TestSpillWithoutTempDir checks that when no temporary file can be made the records stay in
// memory: the figures are the same, with a warning that says so.
func TestSpillWithoutTempDir(t *testing.T) {
	path := writeTrace(t, "venus.plt", fixtures.Meta("tracer", "venus"), func(w *trace.Writer) error {
		return fixtures.Venus(w, fixtures.VenusOptions{Tokens: 200, Uploads: 8})
	})
	want, _ := summaryJSON(t, []string{path}, Options{RecordMemory: -1})
	t.Setenv("TMPDIR", filepath.Join(t.TempDir(), "missing"))
	a, err := analyze(protocol.Files([]string{path}, nil), Options{RecordMemory: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.budget.spilled != 0 {
		t.Fatalf("%d bytes spilled without a temporary directory", a.budget.spilled)
	}
	kept := []string{}
	found := false
	for _, w := range a.s.Warnings {
		if strings.Contains(w, "create spill file") && strings.Contains(w, "kept in memory") {
			found = true
			continue
		}
		kept = append(kept, w)
	}
	if !found {
		t.Errorf("no warning that the records stayed in memory: %q", a.s.Warnings)
	}
	a.s.Warnings = kept
	got, err := json.MarshalIndent(a.s, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("Summary differs from the unbounded one\n%s", firstDiff(string(got), want))
	}
}

// TestServerBusy checks the server's time in spans from the sorted set (serverBusy) against a
// pass over every interval (serverTimeScan), with overlapping blocked and receive intervals.
func TestServerBusy(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for round := range 500 {
		a := &analyzer{}
		b := &recBudget{limit: -1}
		a.blocks.budget, a.srvRecv.budget = b, b
		for range rng.Intn(200) {
			from := int64(rng.Intn(2000))
			a.blocks.add(interval{from, from + int64(1+rng.Intn(100))})
		}
		for range 1 + rng.Intn(200) {
			from := int64(rng.Intn(2000))
			a.srvRecv.add(interval{from, from + int64(1+rng.Intn(60))})
		}
		for range 50 {
			from := int64(rng.Intn(2200)) - 100
			to := from + int64(rng.Intn(600)) - 50
			if got, want := a.serverTimeIn(from, to), a.serverTimeScan(from, to); got != want {
				t.Fatalf("round %d, [%d, %d): %d from the set, %d by a pass", round, from, to, got, want)
			}
		}
		if a.busy == nil {
			t.Fatal("no set made from intervals in memory")
		}
	}
}
