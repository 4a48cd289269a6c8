package export

import (
	"bufio"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/perflab/perflab/trace"
)

// The raw exports write a trace's records as they are, one per line, streaming: memory does not
// grow with the trace. Times are nanoseconds of the recording's monotonic clock (fields ending
// _ns); docs/trace-format.md describes both formats.

// JSONL writes tr as JSON lines: first {"type":"meta", ...} with the recording's metadata, then
// one object per record in file order ("event", "connection", "marker", "lost"), then
// {"type":"footer", ...} when the file was closed cleanly and {"type":"recovery", ...} when it
// was damaged or cut.
func JSONL(w io.Writer, tr *trace.Reader) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	meta := tr.Meta()
	if err := writeJSONLine(bw, struct {
		Type string `json:"type"`
		*trace.Meta
	}{"meta", &meta}); err != nil {
		return err
	}
	var rec trace.Record
	var line []byte
	for {
		err := tr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		switch rec.Kind {
		case trace.KindEvent:
			line = appendEventJSON(line[:0], &rec.Event)
			if _, err := bw.Write(line); err != nil {
				return fmt.Errorf("write jsonl: %w", err)
			}
		case trace.KindConnection:
			c := &rec.Conn
			err = writeJSONLine(bw, connJSON{"connection", c.ID, c.Family.String(), c.Local, c.Remote, c.PID, c.FirstSeen, c.LastSeen})
		case trace.KindMarker:
			m := &rec.Marker
			err = writeJSONLine(bw, markerJSON{"marker", m.TS, m.Dur, m.PID, m.TID, m.Name, m.Value, m.Text})
		case trace.KindLost:
			err = writeJSONLine(bw, lostJSON{"lost", rec.Lost.Source, rec.Lost.Count})
		}
		if err != nil {
			return err
		}
	}
	if ft, ok := tr.Footer(); ok {
		if err := writeJSONLine(bw, struct {
			Type string `json:"type"`
			*trace.Footer
		}{"footer", &ft}); err != nil {
			return err
		}
	}
	if rec := tr.Recovery(); rec.Damaged() {
		if err := writeJSONLine(bw, struct {
			Type string `json:"type"`
			trace.Recovery
		}{"recovery", rec}); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write jsonl: %w", err)
	}
	return nil
}

type connJSON struct {
	Type      string `json:"type"`
	ID        uint64 `json:"id"`
	Family    string `json:"family"`
	Local     string `json:"local"`
	Remote    string `json:"remote"`
	PID       uint32 `json:"pid"`
	FirstSeen int64  `json:"first_seen_ns"`
	LastSeen  int64  `json:"last_seen_ns"`
}

type markerJSON struct {
	Type  string `json:"type"`
	TS    int64  `json:"ts_ns"`
	Dur   int64  `json:"dur_ns"`
	PID   uint32 `json:"pid"`
	TID   uint32 `json:"tid"`
	Name  string `json:"name"`
	Value int64  `json:"value"`
	Text  string `json:"text"`
}

type lostJSON struct {
	Type   string `json:"type"`
	Source string `json:"source"`
	Count  uint64 `json:"count"`
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode jsonl: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write jsonl: %w", err)
	}
	return nil
}

// appendEventJSON appends e as one JSON line. Events are the bulk of a trace, so they are
// written by hand rather than through reflection; every string in them is an enum name. The
// fields a source may leave unfilled (conn, command, req_id: 0 means none) are left out
// rather than written as 0.
func appendEventJSON(b []byte, e *trace.Event) []byte {
	b = append(b, `{"type":"event","ts_ns":`...)
	b = strconv.AppendInt(b, e.TS, 10)
	b = append(b, `,"dur_ns":`...)
	b = strconv.AppendInt(b, e.Dur, 10)
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(e.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendUint(b, uint64(e.TID), 10)
	if e.Conn != 0 {
		b = append(b, `,"conn":`...)
		b = strconv.AppendUint(b, e.Conn, 10)
	}
	b = append(b, `,"dir":"`...)
	b = append(b, e.Dir.String()...)
	b = append(b, `","op":"`...)
	b = append(b, e.Op.String()...)
	b = append(b, `","source":"`...)
	b = append(b, e.Source.String()...)
	b = append(b, `","bytes":`...)
	b = strconv.AppendInt(b, e.Bytes, 10)
	b = append(b, `,"errno":`...)
	b = strconv.AppendUint(b, uint64(e.Errno), 10)
	if e.Command != 0 {
		b = append(b, `,"command":`...)
		b = strconv.AppendUint(b, uint64(e.Command), 10)
	}
	if e.ReqID != 0 {
		b = append(b, `,"req_id":`...)
		b = strconv.AppendUint(b, e.ReqID, 10)
	}
	b = append(b, `,"payload_hex":"`...)
	b = hex.AppendEncode(b, e.Payload)
	return append(b, "\"}\n"...)
}

// CSVColumns are the columns of CSV, in order. "record" is event, connection, marker or lost;
// each row fills the columns of its record type and leaves the others empty, as it leaves an
// event's conn, command and req_id empty when its source did not fill them (0 means none):
//
//	event:      ts_ns dur_ns pid tid conn dir op source bytes errno command req_id payload_hex
//	connection: conn (the id) pid family local remote first_seen_ns last_seen_ns
//	marker:     ts_ns dur_ns pid tid name value text
//	lost:       name (the source) value (the cumulative count)
var CSVColumns = []string{
	"record", "ts_ns", "dur_ns", "pid", "tid", "conn", "dir", "op", "source", "bytes", "errno",
	"command", "req_id", "payload_hex", "name", "value", "text", "family", "local", "remote",
	"first_seen_ns", "last_seen_ns",
}

const (
	colRecord = iota
	colTS
	colDur
	colPID
	colTID
	colConn
	colDir
	colOp
	colSource
	colBytes
	colErrno
	colCommand
	colReqID
	colPayload
	colName
	colValue
	colText
	colFamily
	colLocal
	colRemote
	colFirstSeen
	colLastSeen
	colCount
)

// CSV writes tr as comma-separated values with a header row of CSVColumns and one row per
// record in file order. The metadata, footer and recovery are not in the CSV; JSONL has them.
func CSV(w io.Writer, tr *trace.Reader) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	row := make([]string, colCount)
	itoa := func(v int64) string { return strconv.FormatInt(v, 10) }
	utoa := func(v uint64) string { return strconv.FormatUint(v, 10) }
	var rec trace.Record
	for {
		err := tr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		clear(row)
		switch rec.Kind {
		case trace.KindEvent:
			e := &rec.Event
			row[colRecord] = "event"
			row[colTS], row[colDur] = itoa(e.TS), itoa(e.Dur)
			row[colPID], row[colTID] = utoa(uint64(e.PID)), utoa(uint64(e.TID))
			if e.Conn != 0 {
				row[colConn] = utoa(e.Conn)
			}
			row[colDir], row[colOp], row[colSource] = e.Dir.String(), e.Op.String(), e.Source.String()
			row[colBytes], row[colErrno] = itoa(e.Bytes), utoa(uint64(e.Errno))
			if e.Command != 0 {
				row[colCommand] = utoa(uint64(e.Command))
			}
			if e.ReqID != 0 {
				row[colReqID] = utoa(e.ReqID)
			}
			row[colPayload] = hex.EncodeToString(e.Payload)
		case trace.KindConnection:
			c := &rec.Conn
			row[colRecord] = "connection"
			row[colConn], row[colPID] = utoa(c.ID), utoa(uint64(c.PID))
			row[colFamily], row[colLocal], row[colRemote] = c.Family.String(), c.Local, c.Remote
			row[colFirstSeen], row[colLastSeen] = itoa(c.FirstSeen), itoa(c.LastSeen)
		case trace.KindMarker:
			m := &rec.Marker
			row[colRecord] = "marker"
			row[colTS], row[colDur] = itoa(m.TS), itoa(m.Dur)
			row[colPID], row[colTID] = utoa(uint64(m.PID)), utoa(uint64(m.TID))
			row[colName], row[colValue], row[colText] = m.Name, itoa(m.Value), m.Text
		case trace.KindLost:
			row[colRecord] = "lost"
			row[colName], row[colValue] = rec.Lost.Source, utoa(rec.Lost.Count)
		default:
			continue
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}
