// Package trace is perflab's trace file: events, connections, markers, metadata and lost-event
// counts, written as a chunked, append-only, CRC-checked stream and read back by a streaming
// reader that recovers every complete chunk of a cut or damaged file. It imports only the
// standard library; every other perflab package speaks it.
package trace
