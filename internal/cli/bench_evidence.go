package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/perflab/perflab/collectors"
	"github.com/perflab/perflab/probes"
	"github.com/perflab/perflab/trace"
)

// benchEvidenceRecorder records a bench point's processes with record's eBPF probes and the scheduler
// evidence (record --evidence sched): lab.EvidenceRecorder.
type benchEvidenceRecorder struct{}

// benchEvidence returns the recorder bench uses, or nil and the note that says why there is
// none: probes that cannot be opened here (no root, no BTF, another platform).
func benchEvidence() (*benchEvidenceRecorder, string) {
	p, err := openBenchProbe()
	if err != nil {
		return nil, fmt.Sprintf("no kernel evidence of each round trip's wake-up delay (%v): the run queue above is the kernel's per-thread count (schedstat) only", err)
	}
	p.Close()
	return &benchEvidenceRecorder{}, ""
}

// openBenchProbe opens the socket probes with the scheduler evidence.
func openBenchProbe() (*probes.Probe, error) {
	if err := probes.CheckPrivileges(); err != nil {
		return nil, err
	}
	return probes.Open(probes.Config{PayloadBytes: probes.DefaultPayloadBytes, Evidence: probes.EvidenceSched})
}

// Record starts recording pids into a new trace at path, on probes of its own (a probe runs
// once).
func (benchEvidenceRecorder) Record(ctx context.Context, path string, pids []int) (func() (uint64, error), error) {
	probe, err := openBenchProbe()
	if err != nil {
		return nil, err
	}
	meta := trace.Meta{Version: BuildVersion(), Kernel: trace.KernelRelease(), Command: []string{"perflab", "bench"},
		Probes: probe.Probes(), Source: trace.SourceEBPF.String(), PayloadBytes: probes.DefaultPayloadBytes}
	meta.Host, _ = os.Hostname()
	for _, pid := range pids {
		if err := probe.AddPID(uint32(pid)); err != nil {
			probe.Close()
			return nil, err
		}
		meta.PIDs = append(meta.PIDs, uint32(pid))
	}
	f, err := os.Create(path)
	if err != nil {
		probe.Close()
		return nil, fmt.Errorf("create evidence trace: %w", err)
	}
	w, err := collectors.NewTrace(f, meta, nil)
	if err != nil {
		f.Close()
		probe.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	type ended struct {
		res *collectors.Result
		err error
	}
	done := make(chan ended, 1)
	go func() {
		res, err := collectors.Record(rctx, probe, w, collectors.Options{})
		done <- ended{res, err}
	}()
	return func() (uint64, error) {
		cancel()
		e := <-done
		err := errors.Join(e.err, w.Close(), f.Close(), probe.Close())
		var lost uint64
		if e.res != nil {
			lost = e.res.LostTotal()
		}
		return lost, err
	}, nil
}
