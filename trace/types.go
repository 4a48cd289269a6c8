package trace

import (
	"fmt"
	"time"
)

// Dir is the direction of a message as seen by the traced process.
type Dir uint8

// Directions.
const (
	DirNone Dir = iota // not a data transfer (connect, close, a tracer op)
	DirSend            // bytes left the process
	DirRecv            // bytes entered the process
)

// String returns "send", "recv" or "none".
func (d Dir) String() string {
	switch d {
	case DirSend:
		return "send"
	case DirRecv:
		return "recv"
	}
	return "none"
}

// Op is the operation that produced an event: a system call or a tracer operation.
type Op uint8

// Operations. The numbers are part of the file format: append, never renumber.
const (
	OpUnknown Op = iota
	OpSendto
	OpSendmsg
	OpSendmmsg
	OpRecvfrom
	OpRecvmsg
	OpRecvmmsg
	OpRead
	OpWrite
	OpReadv
	OpWritev
	OpFrameSend // tracer: one protocol frame written to a transport
	OpFrameRecv // tracer: one protocol frame read from a transport
	OpRoundTrip // tracer: a request sent and its reply received (Dur is the RTT)
	OpCall      // tracer: an API call as the application sees it (Dur is its blocking time)
	// Wait calls of an event loop (perflab record's loop probe): Dir is DirNone, Conn 0, Dur
	// the time in the call, Bytes its result (ready descriptors, or completions for
	// io_uring_enter), Errno set when it failed (EINTR = 4).
	OpEpollWait
	OpEpollPwait
	OpEpollPwait2
	OpPoll
	OpPpoll
	OpSelect
	OpPselect6
	OpIoUringEnter
	// Messages seen in user space by uprobes (perflab record), not at a system call.
	OpTLSWrite   // plaintext handed to TLS (OpenSSL SSL_write, SSL_write_ex); Bytes is what it took
	OpTLSRead    // plaintext TLS returned (OpenSSL SSL_read, SSL_read_ex)
	OpUprobeSend // a user-space function that sends a message (record --uprobe ...,send)
	OpUprobeRecv // a user-space function that receives a message (record --uprobe ...,recv)
	// Kernel evidence (perflab record --evidence): Dir is DirNone, the payload holds the
	// details (evidence.go).
	OpRunnable      // a recorded thread was runnable from TS for Dur ns before it ran (SchedInfo)
	OpTCPState      // a TCP connection changed state at TS (TCPInfo)
	OpTCPRetransmit // a TCP connection retransmitted a segment at TS (TCPInfo)
	OpTCPInfo       // a TCP connection's state sampled at TS (TCPInfo)
	opCount
)

var opNames = [...]string{
	OpUnknown:   "unknown",
	OpSendto:    "sendto",
	OpSendmsg:   "sendmsg",
	OpSendmmsg:  "sendmmsg",
	OpRecvfrom:  "recvfrom",
	OpRecvmsg:   "recvmsg",
	OpRecvmmsg:  "recvmmsg",
	OpRead:      "read",
	OpWrite:     "write",
	OpReadv:     "readv",
	OpWritev:    "writev",
	OpFrameSend: "frame_send",
	OpFrameRecv: "frame_recv",
	OpRoundTrip: "round_trip",
	OpCall:      "call",

	OpEpollWait:     "epoll_wait",
	OpEpollPwait:    "epoll_pwait",
	OpEpollPwait2:   "epoll_pwait2",
	OpPoll:          "poll",
	OpPpoll:         "ppoll",
	OpSelect:        "select",
	OpPselect6:      "pselect6",
	OpIoUringEnter:  "io_uring_enter",
	OpTLSWrite:      "tls_write",
	OpTLSRead:       "tls_read",
	OpUprobeSend:    "uprobe_send",
	OpUprobeRecv:    "uprobe_recv",
	OpRunnable:      "runnable",
	OpTCPState:      "tcp_state",
	OpTCPRetransmit: "tcp_retransmit",
	OpTCPInfo:       "tcp_info",
}

// Plaintext reports whether o is a TLS plaintext operation (OpTLSWrite, OpTLSRead): its bytes
// are the application's messages, while the same connection's system calls carry them
// encrypted.
func (o Op) Plaintext() bool { return o == OpTLSWrite || o == OpTLSRead }

// UserSpace reports whether o was seen at a function in user space (a uprobe) rather than at
// a system call or by a tracer.
func (o Op) UserSpace() bool { return o >= OpTLSWrite && o <= OpUprobeRecv }

// String returns the operation's name, e.g. "sendto" or "frame_send".
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", uint8(o))
}

// IsWait reports whether o is the wait call of an event loop (epoll_wait, poll, select,
// io_uring_enter and their variants).
func (o Op) IsWait() bool { return o >= OpEpollWait && o <= OpIoUringEnter }

// ParseOp returns the Op named s, and false when s names none.
func ParseOp(s string) (Op, bool) {
	for i, n := range opNames {
		if n == s {
			return Op(i), true
		}
	}
	return OpUnknown, false
}

// Source says who produced an event.
type Source uint8

// Sources.
const (
	SourceUnknown Source = iota
	SourceEBPF           // kernel probes (perflab record)
	SourceTracer         // an in-process tracer (venusd)
)

// String returns "ebpf", "tracer" or "unknown".
func (s Source) String() string {
	switch s {
	case SourceEBPF:
		return "ebpf"
	case SourceTracer:
		return "tracer"
	}
	return "unknown"
}

// Family is the kind of a connection.
type Family uint8

// Families. The numbers are part of the file format.
const (
	FamilyUnknown Family = iota
	FamilyTCP
	FamilyUDP
	FamilyUnix
	FamilySHM
	FamilyUprobe  // messages seen at a user-space function (record --uprobe), on no socket
	FamilyNetlink // a netlink socket: messages with the kernel (getaddrinfo's RTM_GETADDR), no network
)

// String returns "tcp", "udp", "unix", "shm", "uprobe", "netlink" or "unknown".
func (f Family) String() string {
	switch f {
	case FamilyTCP:
		return "tcp"
	case FamilyUDP:
		return "udp"
	case FamilyUnix:
		return "unix"
	case FamilySHM:
		return "shm"
	case FamilyUprobe:
		return "uprobe"
	case FamilyNetlink:
		return "netlink"
	}
	return "unknown"
}

// MaxPayload is the largest payload head an event may carry, in bytes.
const MaxPayload = 256

// Event is one message-level occurrence: a system call that moved data, or a tracer operation.
type Event struct {
	TS      int64  // start, monotonic clock, ns (CLOCK_MONOTONIC for ebpf; any monotonic origin for a tracer)
	Dur     int64  // duration, ns: syscall latency or the operation's time
	PID     uint32 // process id (tgid)
	TID     uint32 // thread id
	Conn    uint64 // connection id, 0 when unknown; refers to a Connection
	Dir     Dir
	Op      Op
	Source  Source
	Bytes   int64  // result: bytes moved (0 or more); failed calls have Errno set
	Errno   uint32 // errno of a failed call (EAGAIN = 11), 0 on success
	Command uint32 // protocol command filled by a tracer (e.g. VkCommandTypeEXT), 0 when none
	ReqID   uint64 // protocol request id filled by a tracer, 0 when none
	// Payload holds the first bytes of the data moved (at most MaxPayload). A Reader reuses
	// its backing array: copy it to keep it past the next call to Next.
	Payload []byte
}

// Connection describes one socket or transport endpoint seen in a trace.
type Connection struct {
	ID        uint64 // connection id, unique in the trace, never 0
	Family    Family
	Local     string // "127.0.0.1:5556", a unix path, or a shm name
	Remote    string
	PID       uint32 // process that owns the descriptor, 0 when unknown
	FirstSeen int64  // monotonic ns
	LastSeen  int64  // monotonic ns
}

// Marker is a named instant (Dur == 0) or span set by a tracer or the user: "token" 17,
// "phase" "load".
type Marker struct {
	TS    int64 // monotonic ns
	Dur   int64 // ns; 0 for an instant
	PID   uint32
	TID   uint32
	Name  string // "token", "phase", "cycle", ...
	Value int64  // a number that goes with the name (token index, requests in a cycle)
	Text  string // a label that goes with the name ("load", "generate")
}

// Lost is a count of events that a source could not deliver.
type Lost struct {
	Source string // which producer lost them ("ringbuf", "tracer", ...)
	Count  uint64 // cumulative: the latest Lost record of a source holds its total
}

// ProbeTLS in Meta.Probes says that the recording captured TLS plaintext (OpTLSWrite,
// OpTLSRead events): the system calls of a connection that carries TLS then hold its
// ciphertext, the same messages encrypted.
const ProbeTLS = "uprobe:openssl-tls"

// Meta describes a recording. It is stored as JSON in the header chunk.
type Meta struct {
	Version      string            `json:"version"`       // perflab version that wrote the file
	Host         string            `json:"host"`          // host name
	Kernel       string            `json:"kernel"`        // uname release
	Start        time.Time         `json:"start"`         // wall clock at the start of the recording
	StartMono    int64             `json:"start_mono_ns"` // monotonic ns matching Start, to map TS to wall time
	Command      []string          `json:"command,omitempty"`
	PIDs         []uint32          `json:"pids,omitempty"`
	Probes       []string          `json:"probes,omitempty"`
	Source       string            `json:"source,omitempty"` // "ebpf" or "tracer"
	PayloadBytes int               `json:"payload_bytes"`    // payload head size asked for
	Protocol     string            `json:"protocol,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"` // --label K=V
	// Clocks is set on a trace merged from several hosts' recordings (perflab merge): one entry
	// per input, in input order, saying how its timestamps were moved onto this trace's timeline.
	Clocks []Clock `json:"clocks,omitempty"`
}

// Clock says how a merged trace placed one input recording on its timeline: an input timestamp
// t (ns) became t + OffsetNS + DriftPPM·1e-6·(t − RefNS). The first input is the reference
// (zero offset and drift). The true offset and drift lie in [OffsetLoNS, OffsetHiNS] and
// [DriftLoPPM, DriftHiPPM] as far as one-way delays cannot be negative.
type Clock struct {
	Input      string  `json:"input"`        // the input file as given
	Host       string  `json:"host"`         // the input's Meta.Host
	ConnBase   uint64  `json:"conn_base"`    // added to the input's connection ids in the merged trace
	RefNS      int64   `json:"ref_ns"`       // input-clock instant the drift is taken around, ns
	OffsetNS   int64   `json:"offset_ns"`    // estimate, ns
	OffsetLoNS int64   `json:"offset_lo_ns"` // lower bound, ns
	OffsetHiNS int64   `json:"offset_hi_ns"` // upper bound, ns
	DriftPPM   float64 `json:"drift_ppm"`    // estimate, parts per million
	DriftLoPPM float64 `json:"drift_lo_ppm"` // lower bound, ppm
	DriftHiPPM float64 `json:"drift_hi_ppm"` // upper bound, ppm
	Messages   int     `json:"messages"`     // message ends matched against already-placed inputs
	Peer       int     `json:"peer"`         // index of the input it was estimated against (-1 for the reference)
}

// Footer closes a cleanly finished file with totals; a cut file has none.
type Footer struct {
	Events      uint64            `json:"events"`
	Connections uint64            `json:"connections"` // distinct connection ids (a connection record may be written again when it closes)
	Markers     uint64            `json:"markers"`
	Chunks      uint64            `json:"chunks"`
	Lost        map[string]uint64 `json:"lost,omitempty"`
	End         time.Time         `json:"end"`
	EndMono     int64             `json:"end_mono_ns"`
	Stats       map[string]int64  `json:"stats,omitempty"` // producer counters, e.g. probe ns per run
}

// Kind says which field of a Record is set.
type Kind uint8

// Record kinds.
const (
	KindEvent Kind = iota + 1
	KindConnection
	KindMarker
	KindLost
)

// Record is one item of a trace, as a Reader yields it. Only the field named by Kind is valid.
type Record struct {
	Kind   Kind
	Event  Event
	Conn   Connection
	Marker Marker
	Lost   Lost
}

// Recovery reports how much of a damaged or cut file a Reader could read.
type Recovery struct {
	ChunksRead     int   `json:"chunks_read"`     // chunks whose CRC matched
	ChunksBad      int   `json:"chunks_bad"`      // chunks rejected (CRC, length, or bad content)
	BytesSkipped   int64 `json:"bytes_skipped"`   // bytes passed over while resynchronising
	TruncatedBytes int64 `json:"truncated_bytes"` // bytes after the end of the last good chunk that formed no chunk
	Clean          bool  `json:"clean"`           // the footer was read: the file was closed properly
	UnknownChunks  int   `json:"unknown_chunks"`  // chunks of a type this version does not know, skipped
	// Chunks out of place (format version 2 numbers its chunks, and the footer counts them).
	ChunksDuplicate   int `json:"chunks_duplicate,omitempty"`    // chunks with a sequence number read before: skipped, so no record counts twice
	ChunksReordered   int `json:"chunks_reordered,omitempty"`    // chunks that came after a later one: read, but their records are out of order
	ChunksAfterFooter int `json:"chunks_after_footer,omitempty"` // chunks after the footer (appended data): skipped
	ChunksMissing     int `json:"chunks_missing,omitempty"`      // chunks the footer counts that were not read (damaged or removed)
	ChunksExtra       int `json:"chunks_extra,omitempty"`        // format 1 only: chunks read beyond the footer's count (duplicates it cannot tell apart)
}

// Damaged reports whether anything was lost or skipped.
func (r Recovery) Damaged() bool {
	return !r.Clean || r.ChunksBad > 0 || r.BytesSkipped > 0 || r.TruncatedBytes > 0 || r.OutOfPlace()
}

// OutOfPlace reports whether chunks were duplicated, reordered, appended after the footer,
// missing, or (format 1) more than the footer counts.
func (r Recovery) OutOfPlace() bool {
	return r.ChunksDuplicate > 0 || r.ChunksReordered > 0 || r.ChunksAfterFooter > 0 || r.ChunksMissing > 0 || r.ChunksExtra > 0
}

// Add adds o's counts to r, for a summary over several traces; Clean stays true only if both
// were clean.
func (r *Recovery) Add(o Recovery) {
	r.ChunksRead += o.ChunksRead
	r.ChunksBad += o.ChunksBad
	r.BytesSkipped += o.BytesSkipped
	r.TruncatedBytes += o.TruncatedBytes
	r.Clean = r.Clean && o.Clean
	r.UnknownChunks += o.UnknownChunks
	r.ChunksDuplicate += o.ChunksDuplicate
	r.ChunksReordered += o.ChunksReordered
	r.ChunksAfterFooter += o.ChunksAfterFooter
	r.ChunksMissing += o.ChunksMissing
	r.ChunksExtra += o.ChunksExtra
}

// String summarises the recovery in one line.
func (r Recovery) String() string {
	s := fmt.Sprintf("%d chunks read, %d bad, %d bytes skipped, %d bytes truncated, clean=%v",
		r.ChunksRead, r.ChunksBad, r.BytesSkipped, r.TruncatedBytes, r.Clean)
	for _, c := range []struct {
		n    int
		what string
	}{
		{r.ChunksDuplicate, "duplicate chunks skipped (each counted once)"},
		{r.ChunksReordered, "chunks out of order"},
		{r.ChunksAfterFooter, "chunks after the footer skipped"},
		{r.ChunksMissing, "chunks of the footer's count not read"},
		{r.ChunksExtra, "chunks more than the footer counts (format 1 cannot tell duplicates apart)"},
	} {
		if c.n > 0 {
			s += fmt.Sprintf(", %d %s", c.n, c.what)
		}
	}
	return s
}

// FormatError is an unreadable file: it names the byte offset where reading failed.
type FormatError struct {
	Offset int64  // byte offset in the file
	Msg    string // what is wrong
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("offset %d: %s", e.Offset, e.Msg)
}
