package cli

import (
	"os"

	"github.com/perflab/perflab/protocol"
)

// openInputFile opens a trace (or a run file) named on the command line. Every verb opens each of
// its files once, through it, and hands the layers below the open file, never its path (a
// test counts the opens).
var openInputFile = os.Open

// traceInputs returns the Inputs of the files at paths, opened by openInputFile when read.
func traceInputs(paths []string) []protocol.Input { return protocol.Files(paths, openInputFile) }

// traceInput returns the Input of the file at path (traceInputs).
func traceInput(path string) protocol.Input { return traceInputs([]string{path})[0] }

// holdInput opens the file at path once, for a verb that reads it in more than one pass: the
// Input reads the open file from the start each time, and done closes it.
func holdInput(path string) (protocol.Input, func(), error) {
	f, err := openInputFile(path)
	if err != nil {
		return protocol.Input{}, nil, &protocol.ReadError{Path: path, Err: err}
	}
	return protocol.Opened(path, f), func() { f.Close() }, nil
}
