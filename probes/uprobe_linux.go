//go:build linux && amd64

package probes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/perflab/perflab/trace"
)

// tlsSpecs is how many attach cookies the TLS functions take (tlsFuncs); --uprobe specs follow.
const tlsSpecs = 4

// rescanEvery is how often the target processes' maps are read for a libssl they opened
// after the recording started (dlopen, a new program exec'd by a target).
const rescanEvery = 500 * time.Millisecond

// uprobes is the loaded uprobe object and what is attached of it. Its links (in Probe.links)
// are perf events tied to perflab's file descriptors: the kernel removes the uprobes when
// perflab exits, even on SIGKILL.
type uprobes struct {
	p      *Probe
	coll   *ebpf.Collection // the loaded object (its programs' statistics)
	entry  *ebpf.Program    // perflab_uentry
	ret    *ebpf.Program    // perflab_uret
	note   func(string)
	tls    bool
	specs  []UprobeSpec            // --uprobe specs, cookie tlsSpecs+i
	files  map[[2]uint64]bool      // libssl files attached, by device and inode
	conns  map[uconnKey]*connState // connections of --uprobe messages
	scanAt time.Time
}

// uconnKey identifies the connection of a --uprobe message: the process, the file the
// function is in, and the key argument's value.
type uconnKey struct {
	pid  uint32
	file string
	key  uint64
}

// openUprobes loads bpf/uprobe.bpf.c on top of the base object (its ring buffer, target map and
// counters) and sets the layouts of the functions cfg asks for; StartUprobes attaches them.
func (p *Probe) openUprobes(cfg Config) error {
	spec, err := loadUprobe()
	if err != nil {
		return fmt.Errorf("load uprobe spec: %w", err)
	}
	spec.Maps["perflab_events"].MaxEntries = uint32(cfg.RingBytes)
	if err := spec.Variables["payload_bytes"].Set(uint32(cfg.PayloadBytes)); err != nil {
		return fmt.Errorf("set payload bytes: %w", err)
	}
	if !cfg.TLS {
		// The socket hooks only find the socket of a TLS call.
		delete(spec.Programs, "perflab_usend")
		delete(spec.Programs, "perflab_urecv")
	}
	coll, err := p.loadObject(spec) // attaches the socket hooks
	if err != nil {
		return fmt.Errorf("uprobes: %w", err)
	}
	u := &uprobes{p: p, coll: coll, entry: coll.Programs["perflab_uentry"], ret: coll.Programs["perflab_uret"],
		note: cfg.Note, tls: cfg.TLS, files: map[[2]uint64]bool{}, conns: map[uconnKey]*connState{}}
	if u.note == nil {
		u.note = func(string) {}
	}
	specs := coll.Maps["perflab_uspecs"]
	p.u = u
	if cfg.TLS {
		for i, f := range tlsFuncs {
			s := uprobeUspec{Op: f.op, BufArg: 2, LenSrc: f.lenSrc, LenArg: f.lenArg, KeyArg: 1, Tls: 1}
			if err := specs.Update(uint32(i), s, ebpf.UpdateAny); err != nil {
				return fmt.Errorf("set uprobe spec %s: %w", f.symbol, err)
			}
		}
		p.hooks = append(p.hooks, trace.ProbeTLS)
	}
	for i, s := range cfg.Uprobes {
		id := uint32(tlsSpecs + i)
		us := uprobeUspec{BufArg: uint8(s.BufArg), LenArg: uint8(s.LenArg), KeyArg: uint8(s.KeyArg)}
		us.Op = uopSend
		if s.Dir == trace.DirRecv {
			us.Op = uopRecv
		}
		switch {
		case s.LenRet == 32:
			us.LenSrc = lenRet
		case s.LenRet == 64:
			us.LenSrc = lenRet64
		default:
			us.LenSrc = lenArg
		}
		if s.Go {
			us.Go, us.Entry = 1, 1
		}
		if err := specs.Update(id, us, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("set uprobe spec %s: %w", s.Text, err)
		}
		u.specs = append(u.specs, s)
	}
	p.registerKind(kindUEvent, p.handleU)
	return nil
}

// attachSpecs attaches the --uprobe specs, resolving their paths against the targets pids. A
// spec whose file or symbol is missing gives a note and is left out.
func (u *uprobes) attachSpecs(pids []uint32) {
	for i, s := range u.specs {
		path := FindLibrary(s.Path, pids)
		if path == "" {
			u.note(fmt.Sprintf("--uprobe %s: no file %s; not recorded", s.Text, s.Path))
			continue
		}
		u.specs[i].Path = path
		if err := u.attach(path, s.Symbol, uint64(tlsSpecs+i), !s.Go); err != nil {
			u.note(fmt.Sprintf("--uprobe %s: %v; not recorded", s.Text, err))
			continue
		}
		u.p.hooks = append(u.p.hooks, "uprobe:"+path+":"+s.Symbol)
	}
}

// attach puts the entry program (and the return program, with ret) on symbol of path.
func (u *uprobes) attach(path, symbol string, cookie uint64, ret bool) error {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	opts := &link.UprobeOptions{Cookie: cookie, TraceFSPrefix: "perflab"}
	l, err := ex.Uprobe(symbol, u.entry, opts)
	if err != nil {
		if errors.Is(err, link.ErrNoSymbol) {
			return fmt.Errorf("%s has no symbol %s", path, symbol)
		}
		return fmt.Errorf("attach to %s in %s: %w", symbol, path, err)
	}
	u.p.links = append(u.p.links, l)
	if !ret {
		return nil
	}
	r, err := ex.Uretprobe(symbol, u.ret, opts)
	if err != nil {
		return fmt.Errorf("attach to the return of %s in %s: %w", symbol, path, err)
	}
	u.p.links = append(u.p.links, r)
	return nil
}

// AttachTLS attaches the TLS plaintext probes to the libssl at path, once per file (a file
// reached by several paths is attached once). It reports whether the file was new. A library
// without the functions gives a note.
func (p *Probe) AttachTLS(path string) (bool, error) {
	u := p.u
	if u == nil || !u.tls {
		return false, errors.New("attach TLS probes: the probe was opened without TLS")
	}
	st, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("attach TLS probes: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false, fmt.Errorf("attach TLS probes: no inode for %s", path)
	}
	id := [2]uint64{sys.Dev, sys.Ino}
	if u.files[id] {
		return false, nil
	}
	u.files[id] = true
	for i, f := range tlsFuncs {
		if err := u.attach(path, f.symbol, uint64(i), true); err != nil {
			u.note(fmt.Sprintf("TLS: %v; its calls are not recorded", err))
		}
	}
	return true, nil
}

// StartUprobes attaches what is to be found once the targets are known: the --uprobe specs,
// and (with TLS) the libssl each target maps and the one a command about to start will load.
func (p *Probe) StartUprobes(pids []uint32, command string) error {
	u := p.u
	if u == nil {
		return nil
	}
	u.attachSpecs(pids)
	if !u.tls {
		return nil
	}
	var libs []string
	if command != "" {
		libs = append(libs, NeededLibSSL(command)...)
	}
	for _, pid := range pids {
		libs = append(libs, MappedLibSSL(pid)...)
	}
	for _, l := range libs {
		if _, err := p.AttachTLS(l); err != nil {
			u.note(fmt.Sprintf("TLS: %v; its calls are not recorded", err))
		}
	}
	u.scanAt = time.Now()
	return nil
}

// rescan reads the maps of target processes not read yet, every rescanEvery, for a libssl
// they loaded (dlopen, or a program they exec'd).
func (p *Probe) rescan(targets []uint32) {
	u := p.u
	if u == nil || !u.tls || time.Since(u.scanAt) < rescanEvery {
		return
	}
	u.scanAt = time.Now()
	for _, pid := range targets {
		for _, l := range MappedLibSSL(pid) {
			if added, err := p.AttachTLS(l); err == nil && added {
				u.note(fmt.Sprintf("TLS: process %d loaded %s after the recording began: its calls before now are not recorded", pid, l))
			}
		}
	}
}

// handleU converts one uprobe record and emits it.
func (p *Probe) handleU(b []byte, out *trace.Record, emit func(*trace.Record) error) error {
	var re rawUEvent
	if err := decodeUEvent(b, &re); err != nil {
		p.bad++
		return nil
	}
	var conn uint64
	switch re.Op {
	case uopTLSWrite, uopTLSRead:
		if re.Cookie != 0 {
			cs := p.conns[re.Cookie]
			if cs == nil {
				cs = p.newConn(re.Cookie, int64(re.TS))
				cs.conn.Family = trace.FamilyTCP
				cs.conn.PID = re.PID
				*out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
				if err := emit(out); err != nil {
					return err
				}
			}
			cs.conn.LastSeen = max(cs.conn.LastSeen, int64(re.TS+re.Dur))
			conn = cs.conn.ID
		}
	default:
		i := int(re.Spec) - tlsSpecs
		if p.u == nil || i < 0 || i >= len(p.u.specs) {
			p.bad++
			return nil
		}
		s := p.u.specs[i]
		k := uconnKey{pid: re.PID, file: s.Path, key: re.Key}
		cs := p.u.conns[k]
		if cs == nil {
			cs = &connState{conn: trace.Connection{ID: uint64(len(p.order) + 1), Family: trace.FamilyUprobe,
				PID: re.PID, FirstSeen: int64(re.TS), LastSeen: int64(re.TS)}}
			cs.conn.Local = filepath.Base(s.Path)
			if s.KeyArg != 0 {
				cs.conn.Remote = "0x" + strconv.FormatUint(re.Key, 16)
			}
			p.u.conns[k] = cs
			p.order = append(p.order, cs)
			*out = trace.Record{Kind: trace.KindConnection, Conn: cs.conn}
			if err := emit(out); err != nil {
				return err
			}
		}
		cs.conn.LastSeen = max(cs.conn.LastSeen, int64(re.TS+re.Dur))
		conn = cs.conn.ID
	}
	out.Kind = trace.KindEvent
	toUEvent(&re, conn, &out.Event)
	return emit(out)
}
