package protocol

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
)

// Input is one trace to read: its name, as errors and reports show it (the path of a file),
// and how to open it. A verb opens each of its Inputs once and reads it in one pass.
type Input struct {
	Name string
	Open func() (io.ReadSeekCloser, error)
}

// Files returns the Inputs of the traces at paths, opened with open (os.Open when nil) when
// they are read.
func Files(paths []string, open func(string) (io.ReadSeekCloser, error)) []Input {
	if open == nil {
		open = func(p string) (io.ReadSeekCloser, error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			return f, nil
		}
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

// Resumed returns an Input of a trace its caller has begun to read from rest: head holds the
// bytes read from it already. Reading the Input gives head and then the rest of rest, so that
// looking at a trace's first bytes (its kind, its header) costs no second read of them. It can
// be read once; closing it closes rest.
func Resumed(name string, head []byte, rest io.ReadCloser) Input {
	used := false
	return Input{Name: name, Open: func() (io.ReadSeekCloser, error) {
		if used {
			return nil, errors.New("read once already")
		}
		used = true
		return &resumed{Reader: io.MultiReader(bytes.NewReader(head), rest), rest: rest}, nil
	}}
}

// resumed is a trace read from where its first bytes were looked at. It cannot seek.
type resumed struct {
	io.Reader
	rest io.ReadCloser
}

func (r *resumed) Close() error { return r.rest.Close() }

func (r *resumed) Seek(int64, int) (int64, error) { return 0, errors.New("seek a trace read once") }

func (r *resumed) Stat() (fs.FileInfo, error) {
	if s, ok := r.rest.(interface{ Stat() (fs.FileInfo, error) }); ok {
		return s.Stat()
	}
	return nil, errors.New("not a file")
}

// HeadRecorder records the bytes read through it, for Resumed.
type HeadRecorder struct {
	R    io.Reader
	Head []byte
}

func (h *HeadRecorder) Read(p []byte) (int, error) {
	n, err := h.R.Read(p)
	h.Head = append(h.Head, p[:n]...)
	return n, err
}
