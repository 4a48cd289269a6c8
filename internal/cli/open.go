package cli

import (
	"io"
	"os"

	"github.com/perflab/perflab/protocol"
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
