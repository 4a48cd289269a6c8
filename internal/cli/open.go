package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// openInputFile opens a trace (or a run file) named on the command line. Every verb opens each of
// its files once, through it, and hands the layers below the open file, never its path (a
// test counts the opens and the bytes read).
var openInputFile = func(path string) (io.ReadSeekCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// traceInputs returns the Inputs of the files at paths, opened by openInputFile when read.
func traceInputs(paths []string) []protocol.Input { return protocol.Files(paths, openInputFile) }

// traceInput returns the Input of the file at path (traceInputs).
func traceInput(path string) protocol.Input { return traceInputs([]string{path})[0] }

// readTraceFile reads the whole trace at path, opened by openInputFile, as trace.ReadFile does
// (same errors: "read PATH: what").
func readTraceFile(path string) (*trace.File, error) {
	f, err := openInputFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	if st, ok := f.(interface{ Stat() (fs.FileInfo, error) }); ok {
		if fi, err := st.Stat(); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("read %s: %w", path, &trace.FormatError{Offset: 0, Msg: "is a directory, not a trace file"})
		}
	}
	tf, err := trace.Read(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return tf, nil
}
