package venusd

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/perflab/perflab/trace"
	"github.com/perflab/perflab/venusd/transport"
)

// Mode is how the client (the ICD) turns API calls into frames: the seed's experiments.
type Mode uint8

// Modes. Results are bit-identical in every mode.
const (
	// ModeBaseline sends every call in its own frame and waits for its reply: one synchronous
	// round trip per call, as Venus Plus does today.
	ModeBaseline Mode = iota
	// ModeCoalesce (M1) bundles the control messages between sync points into one frame per
	// submit or wait.
	ModeCoalesce
	// ModePipeline (M2) keeps up to ClientConfig.Depth requests in flight for calls whose result
	// is not needed at once; a receive goroutine collects the replies and errors surface at the
	// next sync point.
	ModePipeline
	// ModeCoalescePipeline is M1 and M2 together.
	ModeCoalescePipeline
)

// Modes lists every mode, in the order of the CLI's documentation.
var Modes = []Mode{ModeBaseline, ModeCoalesce, ModePipeline, ModeCoalescePipeline}

var modeNames = [...]string{"baseline", "coalesce", "pipeline", "coalesce+pipeline"}

// String returns the CLI name of the mode: "baseline", "coalesce", "pipeline" or
// "coalesce+pipeline".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("mode%d", uint8(m))
}

// Coalesce reports whether the mode bundles control messages (M1).
func (m Mode) Coalesce() bool { return m == ModeCoalesce || m == ModeCoalescePipeline }

// Pipeline reports whether the mode keeps several requests in flight (M2).
func (m Mode) Pipeline() bool { return m == ModePipeline || m == ModeCoalescePipeline }

// ParseMode returns the mode named s ("pipeline+coalesce" is accepted too).
func ParseMode(s string) (Mode, error) {
	if s == "pipeline+coalesce" {
		return ModeCoalescePipeline, nil
	}
	for i, n := range modeNames {
		if n == s {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q (want %s)", s, strings.Join(modeNames[:], ", "))
}

// DefaultListen is the address a server listens on when ServerConfig.Listen is empty: loopback only.
const DefaultListen = "tcp://127.0.0.1:5556"

// Defaults of ServerConfig and ClientConfig.
const (
	DefaultMaxFrameBytes       = 64 << 20                           // largest frame payload accepted, bytes
	DefaultMaxConns            = 256                                // concurrent connections per server
	DefaultMaxObjects          = 65536                              // live objects (memory, fences, command buffers) per connection
	DefaultMaxMemoryBytes      = 1 << 30                            // device memory per connection, bytes
	DefaultMaxTotalMemoryBytes = 8 << 30                            // device memory of all connections together, bytes
	DefaultIdleTimeout         = time.Minute                        // a connection that sends no frame for this long is closed
	DefaultFrameTimeout        = transport.DefaultFrameTimeout      // a frame not complete this long after its first byte (or a first frame this long after connecting), or a reply the client does not take for this long, closes the connection
	DefaultSocketBufferBytes   = transport.DefaultSocketBufferBytes // SO_SNDBUF and SO_RCVBUF, as Venus Plus
	DefaultShmRingBytes        = transport.DefaultShmRingBytes      // bytes of each shm ring (one per direction)
	DefaultDepth               = 8                                  // requests in flight in pipeline modes
	DefaultShutdownGrace       = 5 * time.Second                    // how long Serve waits for in-flight frames on shutdown
)

// ServerConfig describes a server. The zero value, with Listen empty, listens on DefaultListen.
type ServerConfig struct {
	// Listen is tcp://HOST:PORT, unix:///PATH or shm:///NAME. Port 0 picks a free port (see
	// Server.Addr).
	Listen string
	// AllowRemote permits a TCP address that is not loopback. Without it NewServer refuses one.
	AllowRemote bool
	// MaxConns bounds concurrent connections (default DefaultMaxConns). At the limit a new
	// connection closes an idle one (one that never sent a complete frame first, then the one
	// idle longest); when every connection is busy, the new one is closed at once.
	MaxConns int
	// MaxFrameBytes bounds a frame's payload (default DefaultMaxFrameBytes); a larger declared size
	// closes the connection before anything is allocated.
	MaxFrameBytes int
	// MaxObjects and MaxMemoryBytes are per-connection quotas (defaults DefaultMaxObjects and
	// DefaultMaxMemoryBytes); going past them is an error reply, never an allocation.
	MaxObjects     int
	MaxMemoryBytes int64
	// MaxTotalMemoryBytes bounds the device memory of all connections together (default
	// DefaultMaxTotalMemoryBytes), so that many clients cannot exhaust the host.
	MaxTotalMemoryBytes int64
	// IdleTimeout and FrameTimeout are read deadlines (defaults DefaultIdleTimeout and
	// DefaultFrameTimeout): waiting for a header, and for the rest of a frame once its header came.
	IdleTimeout  time.Duration
	FrameTimeout time.Duration
	// ShutdownGrace bounds how long Serve waits for connections to finish their frame after its
	// context is cancelled (default DefaultShutdownGrace).
	ShutdownGrace time.Duration
	// SocketBufferBytes sets SO_SNDBUF/SO_RCVBUF on TCP connections; 0 reads
	// VENUS_SOCKET_BUFFER_BYTES through Getenv, then DefaultSocketBufferBytes.
	SocketBufferBytes int
	// ShmSpin is the most polls of a shm ring a reader makes before it yields and then sleeps on
	// a futex (0: the default, 50,000: about 50 µs of loads, plus a yield to other goroutines
	// every 64 polls); the reader adapts below it and backs off where polling does not pay
	// (docs/venusd.md).
	ShmSpin int
	// Trace, when set, receives one event per frame the server sends or receives.
	Trace *trace.Writer
	// TracePayloadBytes is how many leading frame bytes each trace event keeps (default 64).
	TracePayloadBytes int
	// Getenv reads the VENUS_* variables (nil: os.Getenv).
	Getenv func(string) string
	// Log receives warnings and VENUS_TRACE_NET summaries (nil: discarded).
	Log io.Writer
}

// ServerStats are a server's counters.
type ServerStats struct {
	Accepted       int64 // connections accepted since start
	Active         int64 // connections open now
	Rejected       int64 // connections closed at once because MaxConns was reached and no idle one could make room
	Evicted        int64 // idle connections closed to make room for a new one at MaxConns
	LiveObjects    int64 // objects alive over all connections (0 once every client left)
	LiveBytes      int64 // device memory bytes alive over all connections
	ProtocolErrors int64 // connections closed for a protocol error (bad magic, size, command)
	Frames         int64 // request frames handled
}

// ClientConfig describes one client run: where to connect, which workload, how.
type ClientConfig struct {
	// Connect is the server's address: tcp://HOST:PORT, unix:///PATH or shm:///NAME.
	Connect string
	// Workload is "llm" (the llama.cpp token loop) or "ping" (small-command ping-pong).
	Workload string
	// Mode is the ICD's strategy.
	Mode Mode
	// Depth is the largest number of requests in flight in the pipeline modes (default DefaultDepth).
	Depth int
	// Delay, Jitter and Bandwidth emulate a link inside the client's transport: each frame is
	// delayed by Delay plus a uniform random part of Jitter in each direction, and serialised at
	// Bandwidth bytes per second (0: unlimited). Frames keep their order.
	Delay     time.Duration
	Jitter    time.Duration
	Bandwidth float64
	// LLM configures the llm workload (zero fields take DefaultLLMConfig's values).
	LLM LLMConfig
	// Ping configures the ping workload (zero fields take DefaultPingConfig's values).
	Ping PingConfig
	// SocketBufferBytes as in ServerConfig.
	SocketBufferBytes int
	// ShmSpin as in ServerConfig.
	ShmSpin int
	// Trace, when set, receives one event per frame, one per completed round trip, the
	// connection, and "phase" and "token" markers.
	Trace *trace.Writer
	// TracePayloadBytes is how many leading frame bytes each trace event keeps (default 64).
	TracePayloadBytes int
	// NoVerify skips computing the in-process reference checksum (Result.ChecksumOK stays true).
	NoVerify bool
	// Getenv reads VENUS_INVALIDATE_MAX_BYTES, VENUS_INVALIDATE_ON_WAIT,
	// VENUS_INVALIDATE_HANDLES, VENUS_SOCKET_BUFFER_BYTES and VENUS_TRACE_NET (nil: os.Getenv).
	Getenv func(string) string
	// Log receives VENUS_TRACE_NET summaries and warnings (nil: discarded).
	Log io.Writer
}

// LLMConfig is the llm workload: a tiny model whose token loop has the traffic profile of
// llama.cpp's Vulkan backend under Venus Plus (seed 001). Every number has a default.
type LLMConfig struct {
	Tokens          int    // tokens generated (default 32)
	Hidden          int    // hidden size of the model, floats (default 64)
	SubmitsPerToken int    // vkQueueSubmit calls per token (default 4)
	WaitsPerToken   int    // vkWaitForFences calls per token; must divide SubmitsPerToken (default 2)
	SubmitMinBytes  int    // smallest host-written payload sent with a submit, bytes (default 80000)
	SubmitMaxBytes  int    // largest, bytes (default 120000)
	StateBytes      int    // host-coherent mapping 0x9: the hidden state (default 8192)
	LogitsBytes     int    // host-coherent mapping 0x11: the logits; vocabulary = LogitsBytes/4 (default 129056)
	ParamsBytes     int    // host-coherent mapping 0x19: token id and position (default 1024)
	UploadChunk     int    // bytes per weight-upload command during load (default 1 MiB)
	Seed            uint64 // seeds the weights, the staging data and the first token (default 1)
}

// DefaultLLMConfig returns seed 001's profile.
func DefaultLLMConfig() LLMConfig {
	return LLMConfig{
		Tokens:          32,
		Hidden:          64,
		SubmitsPerToken: 4,
		WaitsPerToken:   2,
		SubmitMinBytes:  80000,
		SubmitMaxBytes:  120000,
		StateBytes:      8192,
		LogitsBytes:     129056,
		ParamsBytes:     1024,
		UploadChunk:     1 << 20,
		Seed:            1,
	}
}

// PingConfig is the ping workload: small Ping commands (a Venus Plus command, 0x10000002) and
// their replies, for throughput and RTT sweeps.
type PingConfig struct {
	Requests     int           // requests to send (default 1000); ignored when Duration > 0
	Duration     time.Duration // run for this long instead of a count
	Warmup       int           // requests before measuring (default 100)
	RequestBytes int           // frame payload bytes of a request, command header included (default 64)
	ReplyBytes   int           // frame payload bytes of a reply (default 64)
	KeepSamples  bool          // keep every RTT in PingStats.RTTsUS
	// Pause is how long the client waits after each reply before it sends the next request,
	// waiting the way the emulated link does (link.SleepUntil: it sleeps, then spins the last
	// stretch). A run without a link paused by what a delayed run's frames spend in the link
	// leaves both peers idle between frames as long as the delayed run does, so that it pays
	// the same wake-ups from idle: the reference BenchmarkLinkAccuracy holds the link against.
	// The pause is not part of any round trip. 0: none.
	Pause time.Duration
}

// DefaultPingConfig returns the ping defaults.
func DefaultPingConfig() PingConfig {
	return PingConfig{Requests: 1000, Warmup: 100, RequestBytes: 64, ReplyBytes: 64}
}

// ResultSchema is the schema field of Result's JSON.
const ResultSchema = "perflab.venus.run/v1"

// Result is what a client run measured. Its JSON is `perflab venus run --json`: field names are
// a contract (docs/design.md, "JSON fields that scripts rely on").
type Result struct {
	Schema     string  `json:"schema"`
	Workload   string  `json:"workload"`
	Mode       string  `json:"mode"`
	Transport  string  `json:"transport"`
	Depth      int     `json:"depth"`
	DelayUS    float64 `json:"delay_us"`
	Tokens     int     `json:"tokens"`
	TokensPerS float64 `json:"tokens_per_s"`
	LoadS      float64 `json:"load_s"`
	GenerateS  float64 `json:"generate_s"`
	// Checksum is the FNV-1a 64 hash of what the application read back, as 16 hex digits.
	Checksum string `json:"checksum"`
	// ReferenceChecksum is the same workload run in-process without a network ("" with NoVerify).
	ReferenceChecksum string     `json:"reference_checksum,omitempty"`
	ChecksumOK        bool       `json:"checksum_ok"`
	Totals            Totals     `json:"totals"`
	PerToken          PerToken   `json:"per_token"`
	Invalidate        Invalidate `json:"invalidate"`
	Ping              *PingStats `json:"ping,omitempty"`
	// Warnings says, one line each, what in this run did not go as asked: frames that left the
	// emulated link (Delay, Jitter, Bandwidth) late, with the rate the transport carried when
	// it could not keep up.
	Warnings []string `json:"warnings,omitempty"`
	// Link is what the emulated link did, nil without one (no Delay, Jitter or Bandwidth).
	Link *LinkStats `json:"link,omitempty"`
}

// LinkStats is what each direction of the emulated link did over a run.
type LinkStats struct {
	Sent     LinkDirection `json:"sent"`     // the client's frames, on their way to the server
	Received LinkDirection `json:"received"` // the server's frames, those the client waited for
	// SpinMarginUS is how long before each deadline the link stopped sleeping and spun at the
	// end of the run, µs (link.SpinMargin: measured from the timer's recent wake-ups, 20 to 200).
	SpinMarginUS float64 `json:"spin_margin_us"`
}

// LinkDirection is one direction of the emulated link: its frames, and how long after the time
// each could have left (its delay, jitter and serialisation after it entered, or the end of
// the previous frame's write when that was later) the link let it go: the link's own
// accuracy, before the peer's wake-up to take the frame (link.Stats).
type LinkDirection struct {
	Frames int64 `json:"frames"`
	// Late counts the frames let go more than 5% of their time in the link, or 20 µs, late.
	Late int64 `json:"late"`
	// HandOverP50US, HandOverP99US and HandOverMaxUS are the median, 99th percentile and
	// largest lateness of the frames, µs (the percentiles within 0.125 µs below 64 µs).
	HandOverP50US float64 `json:"hand_over_p50_us"`
	HandOverP99US float64 `json:"hand_over_p99_us"`
	HandOverMaxUS float64 `json:"hand_over_max_us"`
}

// Totals are the client's own counters over the whole run.
type Totals struct {
	FramesSent int64 `json:"frames_sent"`
	FramesRecv int64 `json:"frames_recv"`
	// SendCalls and RecvCalls count the system calls that moved the client's bytes (successful
	// write(2)/read(2) on the socket). The shm transport makes none: both stay 0.
	SendCalls  int64   `json:"send_calls"`
	RecvCalls  int64   `json:"recv_calls"`
	BytesSent  int64   `json:"bytes_sent"` // frame bytes, headers included
	BytesRecv  int64   `json:"bytes_recv"`
	RoundTrips int64   `json:"round_trips"` // request frames answered by a reply frame
	SyncWaits  int64   `json:"sync_waits"`  // times the application blocked on a reply
	SendAvgUS  float64 `json:"send_avg_us"` // time to hand one frame to the transport
	SendMaxUS  float64 `json:"send_max_us"`
	RecvAvgUS  float64 `json:"recv_avg_us"` // time blocked reading one frame
	RecvMaxUS  float64 `json:"recv_max_us"`
	EAGAIN     int64   `json:"eagain"` // socket calls that returned EAGAIN (not in SendCalls/RecvCalls)
}

// PerToken are averages over the token phase only (the load phase is excluded).
type PerToken struct {
	Frames     float64 `json:"frames"` // both directions
	FramesSent float64 `json:"frames_sent"`
	FramesRecv float64 `json:"frames_recv"`
	RoundTrips float64 `json:"round_trips"`
	SyncWaits  float64 `json:"sync_waits"`
	BytesSent  float64 `json:"bytes_sent"`
	BytesRecv  float64 `json:"bytes_recv"`
	SendCalls  float64 `json:"send_calls"`
	RecvCalls  float64 `json:"recv_calls"`
}

// Invalidate summarises the client's auto-invalidate on wait (seed 001).
type Invalidate struct {
	Enabled       bool     `json:"enabled"`
	CapBytes      int64    `json:"cap_bytes"`
	Handles       []uint64 `json:"handles,omitempty"` // VENUS_INVALIDATE_HANDLES, empty: all
	Waits         int64    `json:"waits"`
	Eligible      int      `json:"eligible"`       // mappings read back per wait
	BytesPerWait  int64    `json:"bytes_per_wait"` // bytes read back per wait
	SkippedLarge  int      `json:"skipped_large"`
	SkippedHandle int      `json:"skipped_handle"`
}

// PingStats is the ping workload's measurement (round trips after the warm-up).
type PingStats struct {
	Requests       int64   `json:"requests"`
	ThroughputPerS float64 `json:"throughput_per_s"`
	RTTMinUS       float64 `json:"rtt_min_us"`
	RTTP50US       float64 `json:"rtt_p50_us"`
	RTTMeanUS      float64 `json:"rtt_mean_us"`
	RTTP99US       float64 `json:"rtt_p99_us"`
	RTTMaxUS       float64 `json:"rtt_max_us"`
	InflightMean   float64 `json:"inflight_mean"`
	// RTTsUS holds every measured round trip in µs, in order, with PingConfig.KeepSamples;
	// omitted from JSON.
	RTTsUS []float64 `json:"-"`
}
