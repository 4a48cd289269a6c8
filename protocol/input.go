package protocol

import (
	"errors"
	"io"
	"io/fs"
	"os"
)

// Input is one trace to read: its name, as errors and reports show it (the path of a file),
// and how to open it. A verb opens each of its Inputs once and reads it in one pass; auto
// detection (no spec) reads the opened trace once more before it, from the start.
type Input struct {
	Name string
	Open func() (io.ReadSeekCloser, error)
}

// Files returns the Inputs of the traces at paths, opened with open (os.Open when nil) when
// they are read.
func Files(paths []string, open func(string) (*os.File, error)) []Input {
	if open == nil {
		open = os.Open
	}
	ins := make([]Input, len(paths))
	for i, p := range paths {
		ins[i] = Input{Name: p, Open: func() (io.ReadSeekCloser, error) { return open(p) }}
	}
	return ins
}

// openInput opens in; errors are *ReadError naming it, and a directory is refused.
func openInput(in Input) (io.ReadSeekCloser, error) {
	rs, err := in.Open()
	if err != nil {
		return nil, &ReadError{in.Name, unwrapPath(err)}
	}
	if st, ok := rs.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil && fi.IsDir() {
			rs.Close()
			return nil, &ReadError{in.Name, errors.New("is a directory")}
		}
	}
	return rs, nil
}

// Opened returns an Input of a trace the caller has open already (and closes): reading it
// starts from the beginning, and does not close it.
func Opened(name string, rs io.ReadSeeker) Input {
	return Input{Name: name, Open: func() (io.ReadSeekCloser, error) {
		if _, err := rs.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return keepOpen{rs}, nil
	}}
}

// keepOpen is a trace its opener closes; it still tells what it is (Stat), when it can.
type keepOpen struct{ io.ReadSeeker }

func (keepOpen) Close() error { return nil }

func (k keepOpen) Stat() (fs.FileInfo, error) {
	if s, ok := k.ReadSeeker.(interface{ Stat() (fs.FileInfo, error) }); ok {
		return s.Stat()
	}
	return nil, errors.New("not a file")
}
