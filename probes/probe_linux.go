//go:build linux && amd64

package probes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/perflab/perflab/trace"
)

// Probe is a loaded and attached socket probe. Its links are tied to its file descriptors:
// if perflab dies, the kernel detaches every program.
type Probe struct {
	cfg    Config
	objs   recordObjects
	links  []link.Link
	hooks  []string // section names of the attached programs ("fentry/sock_read_iter")
	reader *ringbuf.Reader
	stats  io.Closer // BPF_ENABLE_STATS descriptor while a statistics window is open
	u      *uprobes  // TLS plaintext and --uprobe functions; nil when off (uprobe_linux.go)

	cost cost // what the probes cost, measured (cost_linux.go)

	// Objects loaded on top of the base one (loadObject), closed by Close.
	extra []*ebpf.Collection
	// Decoders of the ring-buffer record kinds other objects write (registerKind).
	kinds map[uint8]kindDecoder

	ev *evidenceProbe // the kernel evidence object, nil when no part is on (evidence_linux.go)

	// Connection ids: socket cookie -> state, in first-seen order.
	conns map[uint64]*connState
	order []*connState
	bad   uint64 // ring-buffer records that did not decode (none expected: reported in Stats)
}

type connState struct {
	conn trace.Connection
}

// recordSpec returns the base object's spec: the embedded object (a benchmark swaps in another
// build of it to compare the two in one run).
var recordSpec = loadRecord

// Open checks privileges and kernel features, loads the probes and attaches them. No process
// is traced until AddPID or FollowChildren. Close detaches everything.
func Open(cfg Config) (*Probe, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("open probes: %w", err)
	}
	if err := CheckPrivileges(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("raise RLIMIT_MEMLOCK: %w", err)
	}
	if err := features.HaveMapType(ebpf.RingBuf); err != nil {
		if errors.Is(err, ebpf.ErrNotSupported) {
			return nil, fmt.Errorf("%w: the kernel has no BPF ring buffer (Linux 5.8+ needed)", ErrUnsupported)
		}
		return nil, fmt.Errorf("probe ring buffer support: %w", err)
	}
	spec, err := recordSpec()
	if err != nil {
		return nil, fmt.Errorf("load probe spec: %w", err)
	}
	spec.Maps["perflab_events"].MaxEntries = uint32(cfg.RingBytes)
	if err := spec.Variables["payload_bytes"].Set(uint32(cfg.PayloadBytes)); err != nil {
		return nil, fmt.Errorf("set payload bytes: %w", err)
	}
	if err := spec.Variables["payload_room"].Set(payloadRoom(cfg.PayloadBytes)); err != nil {
		return nil, fmt.Errorf("set payload room: %w", err)
	}
	if err := setWakeup(spec, cfg); err != nil {
		return nil, err
	}
	p := &Probe{cfg: cfg, conns: map[uint64]*connState{}}
	if err := spec.LoadAndAssign(&p.objs, nil); err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) && os.Getenv("PERFLAB_DEBUG") != "" {
			fmt.Fprintf(os.Stderr, "%+v\n", ve)
		}
		return nil, fmt.Errorf("load probes: %w", err)
	}
	for _, pr := range p.programs() {
		ps := spec.Programs[pr.name]
		l, err := link.AttachTracing(link.TracingOptions{Program: pr.prog, AttachType: ps.AttachType})
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("attach %s to %s: %w", pr.name, ps.SectionName, err)
		}
		p.addLink(l, ps.SectionName)
	}
	if cfg.Waits {
		if err := p.openLoop(); err != nil {
			p.Close()
			return nil, err
		}
	}
	if cfg.TLS || len(cfg.Uprobes) > 0 {
		if err := p.openUprobes(cfg); err != nil {
			p.Close()
			return nil, err
		}
	}
	if cfg.Evidence != 0 {
		if err := p.openEvidence(); err != nil {
			p.Close()
			return nil, err
		}
	}
	p.reader, err = ringbuf.NewReader(p.objs.PerflabEvents)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("open ring buffer: %w", err)
	}
	p.calibrate()
	return p, nil
}

// setWakeup sets an object's wakeup threshold (bpf/common.h): wakeup_bytes, and wakeup_mask so
// that the records between two looks at the ring's fill (at most 64, of at most
// maxRecordBytes each) stay under half the threshold.
func setWakeup(spec *ebpf.CollectionSpec, cfg Config) error {
	mask := uint64(0)
	for mask < 63 && (mask+1)*2*maxRecordBytes*2 <= uint64(cfg.WakeupBytes) {
		mask = mask*2 + 1
	}
	for name, v := range map[string]uint64{"wakeup_bytes": uint64(cfg.WakeupBytes), "wakeup_mask": mask} {
		if sv, ok := spec.Variables[name]; ok {
			if err := sv.Set(v); err != nil {
				return fmt.Errorf("set %s: %w", name, err)
			}
		}
	}
	return nil
}

// payloadRoom is the room an event record has for its payload head: the power of two at or
// above n (0 for 0). Records of calls with an iovec array have twice that.
func payloadRoom(n int) uint32 {
	if n <= 0 {
		return 0
	}
	r := uint32(1)
	for r < uint32(n) {
		r *= 2
	}
	return r
}

// maxRecordBytes is the largest event record: its fixed part and a 256-byte payload head.
const maxRecordBytes = eventHeaderSize + 2*256

// sharedMaps are the base object's maps that every other object uses in place of its own of the
// same name (bpf/common.h).
func (p *Probe) sharedMaps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		"perflab_events":  p.objs.PerflabEvents,
		"perflab_targets": p.objs.PerflabTargets,
		"perflab_counts":  p.objs.PerflabCounts,
		"perflab_gen":     p.objs.PerflabGen,
		"perflab_socks":   p.objs.PerflabSocks,
		"perflab_tasks":   p.objs.PerflabTasks,
	}
}

// loadObject loads another BPF object (a part switched on by its flag, built from its own
// source file) with the base object's shared maps in place of its own, sets its wakeup_bytes
// like the base object's, and attaches its BTF tracepoint and tracing programs. It returns the
// collection, which Close frees; programs of other types are the caller's to attach (their
// links then go in p.links through p.addLink).
func (p *Probe) loadObject(spec *ebpf.CollectionSpec) (*ebpf.Collection, error) {
	repl := map[string]*ebpf.Map{}
	for name, m := range p.sharedMaps() {
		if _, ok := spec.Maps[name]; ok {
			repl[name] = m
		}
	}
	if err := setWakeup(spec, p.cfg); err != nil {
		return nil, err
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: repl})
	if err != nil {
		return nil, fmt.Errorf("load probes: %w", err)
	}
	p.extra = append(p.extra, coll)
	for name, ps := range spec.Programs {
		switch ps.Type {
		case ebpf.Tracing:
			l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name], AttachType: ps.AttachType})
			if err != nil {
				return nil, fmt.Errorf("attach %s to %s: %w", name, ps.SectionName, err)
			}
			p.addLink(l, ps.SectionName)
		}
	}
	return coll, nil
}

// addLink keeps an attached program's link, closed when recording stops, and names its hook
// in the trace metadata.
func (p *Probe) addLink(l link.Link, hook string) {
	p.links = append(p.links, l)
	p.hooks = append(p.hooks, hook)
}

// kindDecoder turns a ring-buffer record of a kind another object writes into trace records
// through emit.
type kindDecoder func(b []byte, out *trace.Record, emit func(*trace.Record) error) error

// registerKind makes handle pass records of kind (enum kind of bpf/common.h) to dec.
func (p *Probe) registerKind(kind uint8, dec kindDecoder) {
	if p.kinds == nil {
		p.kinds = map[uint8]kindDecoder{}
	}
	p.kinds[kind] = dec
}

// namedProg is one of the probe's programs.
type namedProg struct {
	name string // as in bpf/record.bpf.c
	prog *ebpf.Program
}

// programs lists the probe's programs in attach order: the process tracking first, then the
// start-time hooks, then the socket hooks that emit records.
func (p *Probe) programs() []namedProg {
	o := &p.objs
	return []namedProg{
		{"perflab_fork", o.PerflabFork}, {"perflab_pexit", o.PerflabPexit},
		{"perflab_switch", o.PerflabSwitch}, {"perflab_tcpsend", o.PerflabTcpsend},
		{"perflab_send", o.PerflabSend}, {"perflab_recv", o.PerflabRecv},
	}
}

// Probes names the attached programs' hooks, for trace metadata.
func (p *Probe) Probes() []string {
	return append([]string(nil), p.hooks...)
}

// AddPID makes process pid (all its threads, and the children it forks from now on) a target.
func (p *Probe) AddPID(pid uint32) error {
	if err := p.objs.PerflabTargets.Update(pid, uint8(1), ebpf.UpdateAny); err != nil {
		return fmt.Errorf("add target %d: %w", pid, err)
	}
	return p.targetsChanged()
}

// targetsChanged bumps the generation of the target set (bpf/common.h), after an addition:
// what the programs remember of processes that were not targets is then forgotten. A bump by
// the fork hook in between is harmless: the addition is already in the map.
func (p *Probe) targetsChanged() error {
	var gen uint64
	if err := p.objs.PerflabGen.Lookup(uint32(0), &gen); err != nil {
		return fmt.Errorf("read target generation: %w", err)
	}
	if err := p.objs.PerflabGen.Update(uint32(0), gen+1, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("bump target generation: %w", err)
	}
	return nil
}

// RemovePID stops tracing process pid (a target that turned out to be gone).
func (p *Probe) RemovePID(pid uint32) error {
	if err := p.objs.PerflabTargets.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("remove target %d: %w", pid, err)
	}
	return nil
}

// FollowChildren makes every process that pid forks from now on a target, without tracing pid
// itself; perflab calls it on itself around starting a command so that the command's first
// message is seen. The returned function stops it.
func (p *Probe) FollowChildren(pid uint32) (stop func() error, err error) {
	if err := p.objs.PerflabSpawners.Update(pid, uint8(1), ebpf.UpdateAny); err != nil {
		return nil, fmt.Errorf("follow children of %d: %w", pid, err)
	}
	return func() error {
		if err := p.objs.PerflabSpawners.Delete(pid); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("stop following children of %d: %w", pid, err)
		}
		return nil
	}, nil
}

// Targets returns the target processes still alive. The kernel side drops a process when its
// last thread exits; a process that exited before AddPID put it in the map (a short command
// can exit between fork and AddPID) is dropped here, by its state in /proc.
func (p *Probe) Targets() ([]uint32, error) {
	var (
		k    uint32
		v    uint8
		keys []uint32
	)
	it := p.objs.PerflabTargets.Iterate()
	for it.Next(&k, &v) {
		keys = append(keys, k)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("list targets: %w", err)
	}
	out := keys[:0]
	for _, pid := range keys {
		if running(pid) {
			out = append(out, pid)
			continue
		}
		if err := p.RemovePID(pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Counts reads the probes' produced and lost counters.
func (p *Probe) Counts() (Counts, error) {
	var c Counts
	read := func(slot uint32) (uint64, error) {
		var per []uint64
		if err := p.objs.PerflabCounts.Lookup(slot, &per); err != nil {
			return 0, fmt.Errorf("read counter %d: %w", slot, err)
		}
		var sum uint64
		for _, v := range per {
			sum += v
		}
		return sum, nil
	}
	var err error
	if c.LostEvents, err = read(0); err != nil {
		return c, err
	}
	if c.LostConns, err = read(1); err != nil {
		return c, err
	}
	if c.Produced, err = read(2); err != nil {
		return c, err
	}
	if c.Other, err = read(3); err != nil {
		return c, err
	}
	if c.TargetSwitches, err = read(4); err != nil {
		return c, err
	}
	if c.TargetNs, err = read(5); err != nil {
		return c, err
	}
	if c.TargetRuns, err = read(6); err != nil {
		return c, err
	}
	if c.UprobeEvents, err = read(7); err != nil {
		return c, err
	}
	return c, nil
}

// Run drains the ring into emit until ctx is done or every target process has exited; then it
// detaches the programs (Run is once per Probe), drains what is left, and emits the
// connections with their last-seen times and the final lost count. The ring is read on a
// DrainEvery timer; the kernel side wakes the reader early when the ring fills past
// WakeupBytes. It returns nil on a normal stop, or the first error of emit.
func (p *Probe) Run(ctx context.Context, emit func(*trace.Record) error) error {
	st := &runState{emit: emit}
	lastTick := time.Now()
	p.reader.SetDeadline(lastTick.Add(p.cfg.DrainEvery))
	for n := 0; ; n++ {
		err := p.reader.ReadInto(&st.rec)
		if err == nil {
			if err := p.handle(st.rec.RawSample, &st.out, emit); err != nil {
				return err
			}
			// While records keep coming the deadline never fires: tick on the clock.
			if n%1024 != 0 || time.Since(lastTick) < p.cfg.DrainEvery {
				continue
			}
		} else if !errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("read ring buffer: %w", err)
		}
		stop, err := p.tick(ctx, st)
		if err != nil {
			return err
		}
		if stop {
			return p.finish(st)
		}
		lastTick = time.Now()
		p.reader.SetDeadline(lastTick.Add(p.cfg.DrainEvery))
	}
}

// runState is what Run keeps between records: the ring-buffer and trace records it reuses, the
// emit callback, and the last lost count it emitted.
type runState struct {
	rec      ringbuf.Record
	out      trace.Record
	emit     func(*trace.Record) error
	lastLost uint64
	sentLost bool
}

// emitLost emits the lost-events count when it changed since the last one emitted, or always when
// force is set.
func (p *Probe) emitLost(st *runState, force bool) error {
	c, err := p.Counts()
	if err != nil {
		return err
	}
	if !force && st.sentLost && c.LostEvents == st.lastLost {
		return nil
	}
	st.lastLost, st.sentLost = c.LostEvents, true
	st.out = trace.Record{Kind: trace.KindLost, Lost: trace.Lost{Source: LostSource, Count: c.LostEvents}}
	return st.emit(&st.out)
}

// tick is Run's periodic work (stats, new target processes, lost count); it reports whether to
// stop: ctx is done or no target process is left.
func (p *Probe) tick(ctx context.Context, st *runState) (bool, error) {
	p.sampleStats()
	if ctx.Err() != nil {
		return true, nil
	}
	if t, err := p.Targets(); err != nil {
		return false, err
	} else if len(t) == 0 {
		return true, nil
	} else {
		p.rescan(t)
	}
	return false, p.emitLost(st, false)
}

// finish ends Run: it detaches first, so that nothing more is produced, then drains the ring to
// empty, emits the connections and closes the account: the lost count is final.
func (p *Probe) finish(st *runState) error {
	p.detach()
	p.reader.SetDeadline(time.Now().Add(-time.Second))
	for {
		err := p.reader.ReadInto(&st.rec)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("drain ring buffer: %w", err)
			}
			break
		}
		if err := p.handle(st.rec.RawSample, &st.out, st.emit); err != nil {
			return err
		}
	}
	for _, cs := range p.order {
		st.out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
		if err := st.emit(&st.out); err != nil {
			return err
		}
	}
	return p.emitLost(st, true)
}

// handle converts one ring-buffer record and emits it.
func (p *Probe) handle(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
	kind, err := decodeKind(b)
	if err != nil {
		p.bad++
		return nil
	}
	switch kind {
	case kindConn:
		var rc rawConn
		if err := decodeConn(b, &rc); err != nil {
			p.bad++
			return nil
		}
		cs := p.conns[rc.Cookie]
		if cs == nil {
			cs = p.newConn(rc.Cookie, int64(rc.TS))
		}
		first, last := cs.conn.FirstSeen, cs.conn.LastSeen
		toConnection(&rc, cs.conn.ID, &cs.conn)
		cs.conn.FirstSeen, cs.conn.LastSeen = min(first, int64(rc.TS)), max(last, int64(rc.TS))
		*out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
		return emit(out)
	case kindEvent:
		var re rawEvent
		if err := decodeEvent(b, &re); err != nil {
			p.bad++
			return nil
		}
		cs := p.conns[re.Cookie]
		if cs == nil {
			// The identity record was lost with a full ring; it is sent again with the next
			// event of this socket. Until then the connection is known by its family only.
			cs = p.newConn(re.Cookie, int64(re.TS))
			cs.conn.Family = familyOf(re.Family, 0, 0)
			cs.conn.PID = re.PID
			*out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
			if err := emit(out); err != nil {
				return err
			}
		}
		if end := int64(re.TS + re.Dur); end > cs.conn.LastSeen {
			cs.conn.LastSeen = end
		}
		out.Kind = trace.KindEvent
		toEvent(&re, cs.conn.ID, &out.Event)
		return emit(out)
	}
	if dec := p.kinds[kind]; dec != nil {
		return dec(b, out, emit)
	}
	p.bad++ // a kind this version does not know
	return nil
}

func (p *Probe) newConn(cookie uint64, ts int64) *connState {
	cs := &connState{conn: trace.Connection{ID: uint64(len(p.order) + 1), FirstSeen: ts, LastSeen: ts}}
	p.conns[cookie] = cs
	p.order = append(p.order, cs)
	return cs
}

// detach closes the links: the programs stop running, their maps and statistics stay.
func (p *Probe) detach() error {
	var errs []error
	for _, l := range p.links {
		errs = append(errs, l.Close())
	}
	p.links = nil
	return errors.Join(errs...)
}

// Close detaches the programs and frees the maps. It is safe to call more than once.
func (p *Probe) Close() error {
	errs := []error{p.detach()}
	if p.reader != nil {
		errs = append(errs, p.reader.Close())
		p.reader = nil
	}
	if p.stats != nil {
		errs = append(errs, p.stats.Close())
		p.stats = nil
	}
	p.u = nil
	for _, c := range p.extra {
		c.Close()
	}
	p.extra = nil
	errs = append(errs, p.objs.Close())
	p.objs = recordObjects{}
	return errors.Join(errs...)
}

// ProgramExists reports whether the kernel still holds the BPF program with id and it is one
// of perflab's (its name starts with ProgramPrefix).
func ProgramExists(id uint32) bool {
	pr, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		return false
	}
	defer pr.Close()
	info, err := pr.Info()
	return err == nil && strings.HasPrefix(info.Name, ProgramPrefix)
}

// LinkExists reports whether the kernel still holds the BPF link with id.
func LinkExists(id uint32) bool {
	l, err := link.NewFromID(link.ID(id))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
