package export

import (
	"io"
	"io/fs"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// holdTraces opens each of ins once and reads its header, so that a bad file is reported
// before any output is written. It returns Inputs that read the open files from the start
// (every pass of an export reads the same open file) and done, which closes them. Its errors
// are *protocol.ReadError naming the trace, with the reader's *trace.FormatError (the offset)
// or the *os.PathError of opening it inside.
func holdTraces(ins []protocol.Input) (held []protocol.Input, done func(), err error) {
	var files []io.Closer
	done = func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, in := range ins {
		f, err := in.Open()
		if err != nil {
			done()
			return nil, nil, &protocol.ReadError{Path: in.Name, Err: err}
		}
		files = append(files, f)
		if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
			if fi, err := st.Stat(); err == nil && fi.IsDir() {
				done()
				return nil, nil, &protocol.ReadError{Path: in.Name, Err: &trace.FormatError{Offset: 0, Msg: "is a directory, not a trace file"}}
			}
		}
		if _, err := trace.NewReader(f); err != nil {
			done()
			return nil, nil, &protocol.ReadError{Path: in.Name, Err: err}
		}
		held = append(held, protocol.Opened(in.Name, f))
	}
	return held, done, nil
}

// openHeld returns a reader of the held trace in, from its start.
func openHeld(in protocol.Input) (*trace.Reader, error) {
	f, err := in.Open()
	if err != nil {
		return nil, &protocol.ReadError{Path: in.Name, Err: err}
	}
	r, err := trace.NewReader(f)
	if err != nil {
		return nil, &protocol.ReadError{Path: in.Name, Err: err}
	}
	return r, nil
}
