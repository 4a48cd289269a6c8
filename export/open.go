package export

import (
	"io"
	"io/fs"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// holdTraces opens each of ins once and reads its header, so that a bad file is reported
// before any output is written. It returns Inputs that read each open file once, from the
// start (the header bytes read already come back from memory, not from the file), and done,
// which closes them. Its errors
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
		head := &protocol.HeadRecorder{R: f}
		if _, err := trace.NewReader(head); err != nil {
			done()
			return nil, nil, &protocol.ReadError{Path: in.Name, Err: err}
		}
		held = append(held, protocol.Resumed(in.Name, head.Head, f))
	}
	return held, done, nil
}
