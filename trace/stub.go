package trace

// Temporary bodies: replaced by writer.go and reader.go.

import (
	"errors"
	"io"
)

var errTODO = errors.New("trace: not implemented yet")

// DefaultFlushRecords is the default WriterOptions.FlushRecords.
const DefaultFlushRecords = 4096

// DefaultFlushInterval is the default WriterOptions.FlushInterval.
const DefaultFlushInterval = 100 * 1e6

// Writer writes a trace file. It is safe for concurrent use.
type Writer struct{}

// NewWriter writes the header and meta to w and returns a Writer.
func NewWriter(w io.Writer, meta Meta, opt *WriterOptions) (*Writer, error) { return nil, errTODO }

// Create creates the file path and returns a Writer whose Close also closes the file.
func Create(path string, meta Meta, opt *WriterOptions) (*Writer, error) { return nil, errTODO }

// WriteEvent buffers e; its Payload is copied.
func (w *Writer) WriteEvent(e *Event) error { return errTODO }

// WriteConnection buffers c. A connection may be written again to update it (LastSeen).
func (w *Writer) WriteConnection(c *Connection) error { return errTODO }

// WriteMarker buffers m.
func (w *Writer) WriteMarker(m *Marker) error { return errTODO }

// WriteLost records that source has lost total events so far (a cumulative count).
func (w *Writer) WriteLost(source string, total uint64) error { return errTODO }

// SetStat sets a producer counter stored in the footer.
func (w *Writer) SetStat(name string, v int64) {}

// Flush writes buffered records as a chunk.
func (w *Writer) Flush() error { return errTODO }

// Close flushes, writes the footer, and closes the file if the Writer made it.
func (w *Writer) Close() error { return errTODO }

// Reader reads a trace as a stream of records.
type Reader struct{}

// NewReader reads the header and meta; it returns a *FormatError when r holds no trace.
func NewReader(r io.Reader) (*Reader, error) { return nil, errTODO }

// Meta returns the recording's metadata.
func (r *Reader) Meta() Meta { return Meta{} }

// Next fills rec with the next record; io.EOF at the end.
func (r *Reader) Next(rec *Record) error { return errTODO }

// Recovery reports what was read and skipped so far.
func (r *Reader) Recovery() Recovery { return Recovery{} }

// Footer returns the footer, and false when none was read.
func (r *Reader) Footer() (Footer, bool) { return Footer{}, false }

// Read reads a whole trace.
func Read(r io.Reader) (*File, error) { return nil, errTODO }

// ReadFile reads a whole trace file.
func ReadFile(path string) (*File, error) { return nil, errTODO }
