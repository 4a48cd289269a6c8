package cli

import (
	"errors"
	"io"
	"os"

	"github.com/perflab/perflab/analyzers"
	"github.com/perflab/perflab/export"
	"github.com/perflab/perflab/protocol"
	"github.com/perflab/perflab/trace"
)

// The timeline and profile formats of export (docs/reports.md). They decode the protocol with
// the analyzers' defaults (detection); `perflab analyze --format perfetto|pprof` takes
// --protocol for the rest.
func init() {
	registerExport("perfetto", analyzedExport(export.PerfettoTrace))
	registerExport("pprof", analyzedExport(export.PprofTrace))
}

// analyzedExport adapts a one-trace writer of the reports package to an exportFunc. It hands
// export the reader's own error for a bad file (a *trace.FormatError, or the *os.PathError of
// opening it), so that export prints one line naming the file and the offset.
func analyzedExport(fn func(w io.Writer, in protocol.Input, opt analyzers.Options) (trace.Recovery, error)) exportFunc {
	return func(w io.Writer, path string) (trace.Recovery, error) {
		rc, err := fn(w, traceInput(path), analyzers.Options{})
		if err != nil {
			var fe *trace.FormatError
			var pe *os.PathError
			switch {
			case errors.As(err, &fe):
				return rc, fe
			case errors.As(err, &pe) && pe.Path == path:
				return rc, pe
			}
		}
		return rc, err
	}
}
