package trace

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Read reads a whole trace. A damaged or cut trace is no error as long as one chunk could be
// read: the File's Recovery says what was lost.
func Read(r io.Reader) (*File, error) {
	tr, err := NewReader(r)
	if err != nil {
		return nil, err
	}
	return readAll(tr)
}

// ReadFile reads a whole trace file. Errors name the file: "read PATH: offset N: what".
func ReadFile(path string) (*File, error) {
	tr, err := Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, unwrapPathError(err))
	}
	defer tr.Close()
	f, err := readAll(tr)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return f, nil
}

// unwrapPathError drops the *os.PathError wrapper, whose message repeats the path.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

func readAll(tr *Reader) (*File, error) {
	f := &File{Meta: tr.Meta(), Lost: map[string]uint64{}}
	connIndex := map[uint64]int{}
	var rec Record
	for {
		err := tr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch rec.Kind {
		case KindEvent:
			e := rec.Event
			if len(e.Payload) > 0 {
				e.Payload = append([]byte(nil), e.Payload...)
			}
			f.Events = append(f.Events, e)
		case KindConnection:
			f.mergeConn(connIndex, &rec.Conn)
		case KindMarker:
			f.Markers = append(f.Markers, rec.Marker)
		case KindLost:
			f.Lost[rec.Lost.Source] = rec.Lost.Count
		}
	}
	f.Meta = tr.Meta()
	if ft, ok := tr.Footer(); ok {
		f.Footer = &ft
	}
	f.Recovery = tr.Recovery()
	return f, nil
}

// mergeConn folds c into the connection with the same id: later non-empty fields win, FirstSeen
// keeps the earliest non-zero value and LastSeen the latest.
func (f *File) mergeConn(index map[uint64]int, c *Connection) {
	i, ok := index[c.ID]
	if !ok {
		index[c.ID] = len(f.Connections)
		f.Connections = append(f.Connections, *c)
		return
	}
	old := &f.Connections[i]
	if c.Family != FamilyUnknown {
		old.Family = c.Family
	}
	if c.Local != "" {
		old.Local = c.Local
	}
	if c.Remote != "" {
		old.Remote = c.Remote
	}
	if c.PID != 0 {
		old.PID = c.PID
	}
	if c.FirstSeen != 0 && (old.FirstSeen == 0 || c.FirstSeen < old.FirstSeen) {
		old.FirstSeen = c.FirstSeen
	}
	if c.LastSeen > old.LastSeen {
		old.LastSeen = c.LastSeen
	}
}

// Conn returns the connection with id, or nil when the trace has none. It scans
// f.Connections: callers looking up every event's connection build a map once instead.
func (f *File) Conn(id uint64) *Connection {
	for i := range f.Connections {
		if f.Connections[i].ID == id {
			return &f.Connections[i]
		}
	}
	return nil
}

// CheckValid reports the first inconsistency in f that analyses would trip over: a connection
// with id 0 or listed twice, an event naming a connection the trace does not describe, a
// negative duration or byte count, a payload head longer than MaxPayload, an unnamed marker, or
// footer totals that disagree with the records of a cleanly closed file.
func (f *File) CheckValid() error {
	seen := make(map[uint64]bool, len(f.Connections))
	for i, c := range f.Connections {
		if c.ID == 0 {
			return fmt.Errorf("connection %d: id 0", i)
		}
		if seen[c.ID] {
			return fmt.Errorf("connection %d: id %d listed twice", i, c.ID)
		}
		seen[c.ID] = true
	}
	for i := range f.Events {
		e := &f.Events[i]
		switch {
		case e.Conn != 0 && !seen[e.Conn]:
			return fmt.Errorf("event %d: connection %d not in the trace", i, e.Conn)
		case e.Dur < 0:
			return fmt.Errorf("event %d: negative duration %d ns", i, e.Dur)
		case e.Bytes < 0:
			return fmt.Errorf("event %d: negative byte count %d", i, e.Bytes)
		case len(e.Payload) > MaxPayload:
			return fmt.Errorf("event %d: payload head of %d bytes, more than %d", i, len(e.Payload), MaxPayload)
		}
	}
	for i := range f.Markers {
		if f.Markers[i].Name == "" {
			return fmt.Errorf("marker %d: no name", i)
		}
		if f.Markers[i].Dur < 0 {
			return fmt.Errorf("marker %d: negative duration %d ns", i, f.Markers[i].Dur)
		}
	}
	if f.Footer != nil && !f.Recovery.Damaged() {
		if f.Footer.Events != uint64(len(f.Events)) {
			return fmt.Errorf("footer counts %d events, the file holds %d", f.Footer.Events, len(f.Events))
		}
		if f.Footer.Markers != uint64(len(f.Markers)) {
			return fmt.Errorf("footer counts %d markers, the file holds %d", f.Footer.Markers, len(f.Markers))
		}
	}
	return nil
}
