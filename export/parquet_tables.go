package export

// The rows of the Parquet tables that `perflab export --format parquet` writes, one Go type
// per table; docs/sql.md documents every column. Conventions: times are nanoseconds of the
// recording's monotonic clock (columns ending _ns; traces.start and start_mono_ns map them to
// wall time), sizes are bytes, ids and counts are signed 64-bit integers (Spark and Trino read
// unsigned columns poorly), and every row names its trace by trace_id, so that tables of many
// exports can be read together (read_parquet('runs/*/events.parquet')).

// ParquetTables lists the tables, in the order they are documented.
var ParquetTables = []string{"traces", "events", "messages", "round_trips", "connections", "markers", "units"}

// traceRow is one trace: its metadata, labels and what the export counted in it.
type traceRow struct {
	TraceID      string            `parquet:"trace_id,dict"`
	File         string            `parquet:"file"`
	Host         string            `parquet:"host"`
	Kernel       string            `parquet:"kernel"`
	Version      string            `parquet:"version"`
	Source       string            `parquet:"source"`
	Protocol     string            `parquet:"protocol"`                         // decoders used, comma-separated
	Start        int64             `parquet:"start,timestamp(microsecond:utc)"` // µs: Spark reads no ns timestamps
	StartMonoNS  int64             `parquet:"start_mono_ns"`
	Command      []string          `parquet:"command,list"`
	PIDs         []int64           `parquet:"pids,list"`
	PayloadBytes int64             `parquet:"payload_bytes"`
	Labels       map[string]string `parquet:"labels"`
	Events       int64             `parquet:"events"`
	Messages     int64             `parquet:"messages"`
	RoundTrips   int64             `parquet:"round_trips"`
	Connections  int64             `parquet:"connections"`
	Markers      int64             `parquet:"markers"`
	Lost         int64             `parquet:"lost"`
	FirstNS      int64             `parquet:"first_ns"`
	LastNS       int64             `parquet:"last_ns"`
	Clean        bool              `parquet:"clean"`
	ChunksBad    int64             `parquet:"chunks_bad"`
	BytesSkipped int64             `parquet:"bytes_skipped"`
	Truncated    int64             `parquet:"truncated_bytes"`
}

// eventRow is one event: a system call or a tracer operation.
type eventRow struct {
	TraceID string `parquet:"trace_id,dict"`
	TS      int64  `parquet:"ts_ns,delta"`
	Dur     int64  `parquet:"dur_ns"`
	PID     int32  `parquet:"pid"`
	TID     int32  `parquet:"tid"`
	Conn    int64  `parquet:"conn"`
	Dir     string `parquet:"dir,dict"`
	Op      string `parquet:"op,dict"`
	Source  string `parquet:"source,dict"`
	Bytes   int64  `parquet:"bytes"`
	Errno   int32  `parquet:"errno"`
	Command int64  `parquet:"command"`
	ReqID   int64  `parquet:"req_id"`
	Payload []byte `parquet:"payload"`
}

// messageRow is one protocol message decoded from the events.
type messageRow struct {
	TraceID    string `parquet:"trace_id,dict"`
	Conn       int64  `parquet:"conn"`
	PID        int32  `parquet:"pid"`
	TID        int32  `parquet:"tid"`
	Dir        string `parquet:"dir,dict"`
	TS         int64  `parquet:"ts_ns,delta"`
	End        int64  `parquet:"end_ns,delta"`
	Source     string `parquet:"source,dict"`
	Protocol   string `parquet:"protocol,dict"`
	Kind       string `parquet:"kind,dict"` // request or reply
	Command    int64  `parquet:"command"`
	Name       string `parquet:"name,dict"`
	Size       int64  `parquet:"size"`
	Calls      int64  `parquet:"calls"`
	WantsReply bool   `parquet:"wants_reply"`
	ReqID      int64  `parquet:"req_id"`
	RTT        int64  `parquet:"rtt_ns"`
	ReqTS      int64  `parquet:"req_ts_ns"`
	Answered   int64  `parquet:"answered"`
	OpensUnit  bool   `parquet:"opens_unit"`
	Truncated  bool   `parquet:"truncated"`
	LostSync   bool   `parquet:"lost_sync"`
}

// roundTripRow is one request and its reply.
type roundTripRow struct {
	TraceID  string `parquet:"trace_id,dict"`
	PID      int32  `parquet:"pid"`
	TID      int32  `parquet:"tid"`
	Conn     int64  `parquet:"conn"`
	Side     string `parquet:"side,dict"`   // client (the reply received) or server (the reply sent)
	Origin   string `parquet:"origin,dict"` // decoded, tracer_event or tracer_frames
	Protocol string `parquet:"protocol,dict"`
	Command  int64  `parquet:"command"`
	Name     string `parquet:"name,dict"`
	ReqTS    int64  `parquet:"req_ts_ns,delta"`
	End      int64  `parquet:"end_ns,delta"`
	RTT      int64  `parquet:"rtt_ns"`
	ReqID    int64  `parquet:"req_id"`
	Bytes    int64  `parquet:"reply_bytes"`
}

// connectionRow is one connection, as its last record in the trace describes it.
type connectionRow struct {
	TraceID   string `parquet:"trace_id,dict"`
	ID        int64  `parquet:"id"`
	Family    string `parquet:"family,dict"`
	Local     string `parquet:"local"`
	Remote    string `parquet:"remote"`
	PID       int32  `parquet:"pid"`
	FirstSeen int64  `parquet:"first_seen_ns"`
	LastSeen  int64  `parquet:"last_seen_ns"`
}

// markerRow is one marker: a named instant or span.
type markerRow struct {
	TraceID string `parquet:"trace_id,dict"`
	TS      int64  `parquet:"ts_ns,delta"`
	Dur     int64  `parquet:"dur_ns"`
	PID     int32  `parquet:"pid"`
	TID     int32  `parquet:"tid"`
	Name    string `parquet:"name,dict"`
	Value   int64  `parquet:"value"`
	Text    string `parquet:"text"`
}

// unitRow is one unit of work: a unit marker (a token), or a request that opens a unit by
// the protocol's spec (a graph_compute), which lasts until the next such request.
type unitRow struct {
	TraceID string `parquet:"trace_id,dict"`
	Name    string `parquet:"name,dict"`
	Source  string `parquet:"source,dict"` // marker or command
	Dir     string `parquet:"dir,dict"`    // of a command: send (a traced client) or recv (a traced server)
	Index   int64  `parquet:"index"`       // 0, 1, ... per trace, source and dir
	PID     int32  `parquet:"pid"`
	TS      int64  `parquet:"ts_ns,delta"`
	// End is a marker's end (its start for an instant) or the next command's end; NULL for the
	// last command, which opens a unit that the trace does not close.
	End   *int64 `parquet:"end_ns,optional"`
	Value int64  `parquet:"value"` // a marker's value (the token's index)
}
