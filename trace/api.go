package trace

// This file fixes the API of the trace package; the bodies live in writer.go and reader.go.

import (
	"io"
	"time"
)

// WriterOptions tunes a Writer. The zero value (or nil) means the defaults.
type WriterOptions struct {
	// FlushRecords is how many records are buffered before a chunk is written (default DefaultFlushRecords).
	FlushRecords int
	// FlushInterval bounds how long a buffered record waits before its chunk is written, also when
	// the producer goes idle (default DefaultFlushInterval; negative: no timer, chunks are written
	// only by count, Flush and Close).
	FlushInterval time.Duration
	// Now returns the wall clock written in the footer (default time.Now); tests that need
	// byte-identical files set it.
	Now func() time.Time
}

// File is a whole trace read into memory, for tests and small traces. Analyses of large traces
// use a Reader, whose memory does not grow with the file.
type File struct {
	Meta        Meta
	Events      []Event
	Connections []Connection // one per id, merged over all records of that id, in first-seen order
	Markers     []Marker
	Lost        map[string]uint64 // latest total per source
	Footer      *Footer           // nil when the file was not closed cleanly
	Recovery    Recovery
}

var (
	_ io.Closer = (*Writer)(nil)
)
