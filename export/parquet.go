package export

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// ParquetOptions tunes Parquet.
type ParquetOptions struct {
	// Analyzers selects the protocol decoder (Protocol, SpecFile, Spec) and the unit of work
	// (Unit, UnitCommands) as for analyze.
	Analyzers analyzers.Options
	// Labels are added to every trace's labels (the recording's own --label K=V), replacing a
	// label of the same key.
	Labels map[string]string
	// RowGroupRows is the most rows of one row group (0: parquetRowGroupRows). It bounds the
	// memory the writers hold: a row group is buffered until it is full.
	RowGroupRows int
	// PartRows is the most rows of one part file of a table (0: parquetPartRows).
	PartRows int
}

// parquetRowGroupRows is the default row group size: 64Ki rows keep the buffered row groups of
// all tables near 30 MB with full payload heads, and are large enough for engines to skip
// row groups by their statistics.
const parquetRowGroupRows = 1 << 16

// parquetBatch is how many rows are handed to a table's writer at once.
const parquetBatch = 1024

// Parquet writes the traces ins as Parquet tables in dir, one directory per table
// (ParquetTables: traces/, events/, ...) of part files (part-00000.parquet, ...: a part holds
// at most parquetPartRows rows), creating dir when missing. Every row
// carries its trace's trace_id, a hash of the trace's metadata, so that the tables of several
// exports can be read together. The export streams: memory holds the row groups being
// written, the connections and the requests awaiting a reply, not the traces. It returns the
// Recovery of each trace read. A trace that cannot be read gives a *protocol.ReadError, and
// no file is left in dir.
func Parquet(dir string, ins []protocol.Input, opt ParquetOptions) ([]trace.Recovery, error) {
	if len(ins) == 0 {
		return nil, errors.New("write parquet: no trace given")
	}
	held, done, err := holdTraces(ins)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := analyzers.Messages(nil, opt.Analyzers, func(*protocol.Message) error { return nil }); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write parquet: %w", err)
	}
	pw := &parquetWriter{opt: opt, unit: opt.Analyzers.Unit}
	if pw.unit == "" {
		pw.unit = "token"
	}
	if opt.Analyzers.UnitCommands != "" {
		pw.unitCmds = map[string]bool{}
		for _, n := range strings.Split(opt.Analyzers.UnitCommands, ",") {
			if n = strings.TrimSpace(n); n != "" {
				pw.unitCmds[n] = true
			}
		}
	}
	if err := pw.open(dir); err != nil {
		pw.abort()
		return nil, err
	}
	err = analyzers.Visit(held, opt.Analyzers, pw)
	if err == nil {
		err = pw.err
	}
	if err == nil {
		err = pw.close()
	}
	if err != nil {
		pw.abort()
		var re *protocol.ReadError
		if errors.As(err, &re) {
			return pw.recs, err
		}
		return pw.recs, fmt.Errorf("write parquet: %w", err)
	}
	return pw.recs, nil
}

// parquetPartRows is the most rows of one part file of a table: a writer keeps the metadata
// and page indexes of every row group of its file until it closes it, so a table is cut into
// parts to keep that bounded (a few MB) whatever the trace's length.
const parquetPartRows = 1 << 20

// table writes the rows of one table as part files DIR/NAME/part-NNNNN.parquet, handing them
// to the writer in batches.
type table[T any] struct {
	dir, name string
	rgRows    int
	maxRows   int64 // rows of a part
	part      int   // number of the part being written
	partRows  int64 // rows written to it
	files     *[]string
	f         *os.File
	w         *parquet.GenericWriter[T]
	buf       []T
	arena     []byte // copies of the payloads of the rows in buf
}

func openTable[T any](dir, name string, rows, partRows int, files *[]string) (*table[T], error) {
	t := &table[T]{dir: filepath.Join(dir, name), name: name, rgRows: rows, maxRows: int64(partRows), files: files,
		buf: make([]T, 0, min(parquetBatch, partRows))}
	if err := os.MkdirAll(t.dir, 0o755); err != nil {
		return nil, err
	}
	return t, t.openPart()
}

func (t *table[T]) openPart() error {
	path := filepath.Join(t.dir, fmt.Sprintf("part-%05d.parquet", t.part))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	*t.files = append(*t.files, path)
	t.f, t.partRows = f, 0
	if t.w != nil {
		t.w.Reset(f) // the next part reuses the buffers of the last
		return nil
	}
	t.w = parquet.NewGenericWriter[T](f, parquet.MaxRowsPerRowGroup(int64(t.rgRows)),
		parquet.Compression(&zstd.Codec{Level: zstd.SpeedFastest}),
		parquet.CreatedBy("perflab", "export", ""), parquet.KeyValueMetadata("perflab.table", t.name))
	return nil
}

// add appends r; it writes the batch when it is full.
func (t *table[T]) add(r T) error {
	t.buf = append(t.buf, r)
	if len(t.buf) == cap(t.buf) {
		return t.flush()
	}
	return nil
}

func (t *table[T]) flush() error {
	if len(t.buf) == 0 {
		return nil
	}
	if t.partRows > 0 && t.partRows+int64(len(t.buf)) > t.maxRows {
		if err := t.closePart(); err != nil {
			return err
		}
		t.part++
		if err := t.openPart(); err != nil {
			return err
		}
	}
	_, err := t.w.Write(t.buf)
	t.partRows += int64(len(t.buf))
	clear(t.buf)
	t.buf, t.arena = t.buf[:0], t.arena[:0]
	return err
}

func (t *table[T]) closePart() error {
	err := t.w.Close()
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t *table[T]) close() error {
	err := t.flush()
	if cerr := t.closePart(); err == nil {
		err = cerr
	}
	return err
}

// parquetWriter is the protocol.Visitor that fills the tables. The first error sticks in err.
type parquetWriter struct {
	opt      ParquetOptions
	unit     string          // unit marker name
	unitCmds map[string]bool // Options.UnitCommands
	err      error
	dir      string
	files    []string // the part files created
	recs     []trace.Recovery

	traces   *table[traceRow]
	events   *table[eventRow]
	messages *table[messageRow]
	rts      *table[roundTripRow]
	conns    *table[connectionRow]
	markers  *table[markerRow]
	units    *table[unitRow]

	// the trace being read
	cur      traceRow
	meta     trace.Meta
	protos   map[string]bool
	connMap  map[uint64]*connectionRow
	lost     map[string]uint64
	haveTS   bool
	unitIdx  int64
	cmdUnits [3]*unitRow // the last unit-opening request of each direction, awaiting its end
	cmdIdx   [3]int64
	rtProto  string // protocol of the tracer's round-trip events
	rtSpec   *protocol.Spec
}

func (pw *parquetWriter) open(dir string) error {
	rows := pw.opt.RowGroupRows
	if rows <= 0 {
		rows = parquetRowGroupRows
	}
	pw.dir = dir
	parts := pw.opt.PartRows
	if parts <= 0 {
		parts = parquetPartRows
	}
	var err error
	if pw.traces, err = openTable[traceRow](dir, "traces", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.events, err = openTable[eventRow](dir, "events", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.messages, err = openTable[messageRow](dir, "messages", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.rts, err = openTable[roundTripRow](dir, "round_trips", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.conns, err = openTable[connectionRow](dir, "connections", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.markers, err = openTable[markerRow](dir, "markers", rows, parts, &pw.files); err != nil {
		return err
	}
	if pw.units, err = openTable[unitRow](dir, "units", rows, parts, &pw.files); err != nil {
		return err
	}
	return nil
}

// close finishes every file; the first error wins.
func (pw *parquetWriter) close() error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	if pw.traces != nil {
		keep(pw.traces.close())
	}
	if pw.events != nil {
		keep(pw.events.close())
	}
	if pw.messages != nil {
		keep(pw.messages.close())
	}
	if pw.rts != nil {
		keep(pw.rts.close())
	}
	if pw.conns != nil {
		keep(pw.conns.close())
	}
	if pw.markers != nil {
		keep(pw.markers.close())
	}
	if pw.units != nil {
		keep(pw.units.close())
	}
	pw.traces, pw.events, pw.messages, pw.rts, pw.conns, pw.markers, pw.units = nil, nil, nil, nil, nil, nil, nil
	return first
}

// abort closes and removes every file written.
func (pw *parquetWriter) abort() {
	pw.close()
	for _, f := range pw.files {
		os.Remove(f)
	}
	for _, name := range ParquetTables {
		os.Remove(filepath.Join(pw.dir, name)) // only when empty: a directory of the user's stays
	}
}

func (pw *parquetWriter) keep(err error) {
	if pw.err == nil && err != nil {
		pw.err = err
	}
}

// traceID names the trace at path: the first 8 bytes, in hex, of the SHA-256 of its metadata
// (host, start time, command, labels, ...), its file name and its size, so that the same file
// exported twice keeps its id and two recordings do not share one.
func traceID(path string, m trace.Meta) string {
	b, _ := json.Marshal(m) // Meta always marshals
	h := sha256.New()
	h.Write(b)
	var size int64
	if st, err := os.Stat(path); err == nil {
		size = st.Size()
	}
	fmt.Fprintf(h, "\x00%s\x00%d", filepath.Base(path), size)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Begin starts a trace.
func (pw *parquetWriter) Begin(i int, path string, meta trace.Meta) {
	labels := maps.Clone(meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, pw.opt.Labels)
	pids := make([]int64, len(meta.PIDs))
	for k, p := range meta.PIDs {
		pids[k] = int64(p)
	}
	pw.meta = meta
	pw.cur = traceRow{TraceID: traceID(path, meta), File: filepath.Base(path), Host: meta.Host, Kernel: meta.Kernel,
		Version: meta.Version, Source: meta.Source, Start: meta.Start.UnixMicro(), StartMonoNS: meta.StartMono,
		Command: slices.Clone(meta.Command), PIDs: pids, PayloadBytes: int64(meta.PayloadBytes), Labels: labels}
	pw.protos = map[string]bool{}
	pw.connMap = map[uint64]*connectionRow{}
	pw.lost = map[string]uint64{}
	pw.haveTS = false
	pw.unitIdx = 0
	pw.cmdUnits, pw.cmdIdx = [3]*unitRow{}, [3]int64{}
	pw.rtProto, pw.rtSpec = "venus", nil
	if sp := pw.opt.Analyzers.Spec; sp != nil {
		pw.rtProto, pw.rtSpec = sp.Name, sp
	} else if pw.opt.Analyzers.SpecFile != "" {
		if sp, err := protocol.LoadSpec(pw.opt.Analyzers.SpecFile); err == nil {
			pw.rtProto, pw.rtSpec = sp.Name, sp
		}
	} else if p := pw.opt.Analyzers.Protocol; p != "" && p != "auto" {
		if sp, err := protocol.BuiltinSpec(p); err == nil {
			pw.rtProto, pw.rtSpec = sp.Name, sp
		}
	}
	if pw.rtSpec == nil {
		pw.rtSpec, _ = protocol.BuiltinSpec("venus")
	}
}

// Record takes one record of the trace.
func (pw *parquetWriter) Record(rec *trace.Record) {
	if pw.err != nil {
		return
	}
	id := pw.cur.TraceID
	switch rec.Kind {
	case trace.KindEvent:
		e := &rec.Event
		pw.cur.Events++
		end := e.TS + e.Dur
		if !pw.haveTS {
			pw.cur.FirstNS, pw.cur.LastNS, pw.haveTS = e.TS, end, true
		} else {
			pw.cur.FirstNS, pw.cur.LastNS = min(pw.cur.FirstNS, e.TS), max(pw.cur.LastNS, end)
		}
		t := pw.events
		var payload []byte
		if len(e.Payload) > 0 {
			n := len(t.arena)
			t.arena = append(t.arena, e.Payload...)
			payload = t.arena[n:len(t.arena):len(t.arena)]
		}
		pw.keep(t.add(eventRow{TraceID: id, TS: e.TS, Dur: e.Dur, PID: int32(e.PID), TID: int32(e.TID),
			Conn: int64(e.Conn), Dir: e.Dir.String(), Op: e.Op.String(), Source: e.Source.String(),
			Bytes: e.Bytes, Errno: int32(e.Errno), Command: int64(e.Command), ReqID: int64(e.ReqID), Payload: payload}))
		if e.Op == trace.OpRoundTrip && e.Dir != trace.DirSend && e.Dir != trace.DirRecv {
			// A tracer's round trip as the client counted it: TS is when the request was sent.
			name := pw.rtSpec.CommandName(uint64(e.Command))
			if name == "" {
				name = fmt.Sprintf("cmd%d", e.Command)
			}
			pw.roundTrip(roundTripRow{PID: int32(e.PID), TID: int32(e.TID), Conn: int64(e.Conn), Side: "client",
				Origin: "tracer_event", Protocol: pw.rtProto, Command: int64(e.Command), Name: name,
				ReqTS: e.TS, End: e.TS + e.Dur, RTT: e.Dur, ReqID: int64(e.ReqID)})
		}
	case trace.KindConnection:
		c := &rec.Conn
		row := pw.connMap[c.ID]
		if row == nil {
			row = &connectionRow{TraceID: id, ID: int64(c.ID)}
			pw.connMap[c.ID] = row
		}
		pid := row.PID
		*row = connectionRow{TraceID: id, ID: int64(c.ID), Family: c.Family.String(), Local: c.Local,
			Remote: c.Remote, PID: int32(c.PID), FirstSeen: c.FirstSeen, LastSeen: c.LastSeen}
		if row.PID == 0 {
			row.PID = pid
		}
	case trace.KindMarker:
		m := &rec.Marker
		pw.cur.Markers++
		pw.keep(pw.markers.add(markerRow{TraceID: id, TS: m.TS, Dur: m.Dur, PID: int32(m.PID), TID: int32(m.TID),
			Name: m.Name, Value: m.Value, Text: m.Text}))
		if m.Name == pw.unit {
			end := m.TS + max(m.Dur, 0)
			pw.keep(pw.units.add(unitRow{TraceID: id, Name: m.Name, Source: "marker", Index: pw.unitIdx,
				PID: int32(m.PID), TS: m.TS, End: &end, Value: m.Value}))
			pw.unitIdx++
		}
	case trace.KindLost:
		pw.lost[rec.Lost.Source] = rec.Lost.Count // cumulative: the latest is the total
	}
}

// cmdName names m's command as analyze's commands[] do.
func cmdName(m *protocol.Message) string {
	switch {
	case m.Name != "":
		return m.Name
	case m.Command != 0:
		return fmt.Sprintf("cmd%d", m.Command)
	case m.Protocol == "raw":
		return "(raw)"
	}
	return "(unknown)"
}

// Message takes one decoded message.
func (pw *parquetWriter) Message(m *protocol.Message) {
	if pw.err != nil {
		return
	}
	pw.cur.Messages++
	pw.protos[m.Protocol] = true
	kind := "request"
	switch {
	case m.Push:
		kind = "push"
	case m.IsReply:
		kind = "reply"
	}
	opens := m.OpensUnit(pw.unitCmds)
	pw.keep(pw.messages.add(messageRow{TraceID: pw.cur.TraceID, Conn: int64(m.Conn), PID: int32(m.PID), TID: int32(m.TID),
		Dir: m.Dir.String(), TS: m.TS, End: m.End, Source: m.Source.String(), Protocol: m.Protocol, Kind: kind,
		Command: int64(m.Command), Name: cmdName(m), Size: m.Size, Calls: int64(m.Calls), WantsReply: m.WantsReply,
		ReqID: int64(m.ReqID), RTT: m.RTT, ReqTS: m.ReqTS, Answered: int64(m.Answered), OpensUnit: opens,
		Truncated: m.Truncated, LostSync: m.LostSync}))
	if m.IsReply && m.RTT > 0 && (m.Dir == trace.DirSend || m.Dir == trace.DirRecv) {
		side, origin := "client", "decoded"
		if m.Dir == trace.DirSend {
			side = "server"
		}
		if m.Source == trace.SourceTracer {
			origin = "tracer_frames"
		}
		pw.roundTrip(roundTripRow{PID: int32(m.PID), TID: int32(m.TID), Conn: int64(m.Conn), Side: side, Origin: origin,
			Protocol: m.Protocol, Command: int64(m.Command), Name: cmdName(m), ReqTS: m.ReqTS, End: m.ReqTS + m.RTT,
			RTT: m.RTT, ReqID: int64(m.ReqID), Bytes: m.Size})
	}
	if opens && (m.Dir == trace.DirSend || m.Dir == trace.DirRecv) {
		name := m.UnitName()
		if pw.unitCmds != nil || name == "" {
			name = "unit"
			if pw.opt.Analyzers.Unit != "" {
				name = pw.opt.Analyzers.Unit
			}
		}
		// A unit opened by a request counts from the request's end, as analyze counts messages
		// when they complete, and lasts until the next one.
		if prev := pw.cmdUnits[m.Dir]; prev != nil {
			end := m.End
			prev.End = &end
			pw.keep(pw.units.add(*prev))
		}
		pw.cmdUnits[m.Dir] = &unitRow{TraceID: pw.cur.TraceID, Name: name, Source: "command", Dir: m.Dir.String(),
			Index: pw.cmdIdx[m.Dir], PID: int32(m.PID), TS: m.End}
		pw.cmdIdx[m.Dir]++
	}
}

// Answered takes a further request answered by the reply m.
func (pw *parquetWriter) Answered(m *protocol.Message, req protocol.Answered) {
	reqTS, cmd, name := req.ReqTS, req.Command, req.Name
	if pw.err != nil || m.Source == trace.SourceTracer {
		return // analyze counts a tracer's round trips from its own events
	}
	if name == "" {
		name = fmt.Sprintf("cmd%d", cmd)
	}
	side := "client"
	if m.Dir == trace.DirSend {
		side = "server"
	}
	pw.roundTrip(roundTripRow{PID: int32(m.PID), TID: int32(m.TID), Conn: int64(m.Conn), Side: side, Origin: "decoded",
		Protocol: m.Protocol, Command: int64(cmd), Name: name, ReqTS: reqTS, End: m.End, RTT: m.End - reqTS, Bytes: m.Size})
}

func (pw *parquetWriter) roundTrip(r roundTripRow) {
	r.TraceID = pw.cur.TraceID
	pw.cur.RoundTrips++
	pw.keep(pw.rts.add(r))
}

// End closes a trace: its connections, its last unit, and its row in traces.
func (pw *parquetWriter) End(i int, rec trace.Recovery) {
	pw.recs = append(pw.recs, rec)
	if pw.err != nil {
		return
	}
	for _, u := range pw.cmdUnits {
		if u != nil {
			pw.keep(pw.units.add(*u))
		}
	}
	ids := slices.Sorted(maps.Keys(pw.connMap))
	for _, id := range ids {
		pw.keep(pw.conns.add(*pw.connMap[id]))
	}
	pw.cur.Connections = int64(len(ids))
	for _, n := range pw.lost {
		pw.cur.Lost += int64(n)
	}
	pw.cur.Protocol = strings.Join(slices.Sorted(maps.Keys(pw.protos)), ",")
	pw.cur.Clean, pw.cur.ChunksBad = rec.Clean, int64(rec.ChunksBad)
	pw.cur.BytesSkipped, pw.cur.Truncated = rec.BytesSkipped, rec.TruncatedBytes
	pw.keep(pw.traces.add(pw.cur))
}
