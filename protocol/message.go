package protocol

import "github.com/perflab/perflab/trace"

// Message is one protocol message (a frame) decoded from a trace: rebuilt from system calls for
// an eBPF trace, or taken from a tracer's frame events.
type Message struct {
	Trace    int       // index of the trace in the paths given
	Conn     uint64    // connection id in its trace
	Dir      trace.Dir // send or recv, as seen by the traced process
	TS       int64     // start of the first call that carried the frame, monotonic ns
	End      int64     // end of the last call that carried the frame, monotonic ns
	PID      uint32
	TID      uint32
	Source   trace.Source
	Protocol string // decoder that produced it: venus, ggml-rpc, resp, raw, or a spec's name
	Command  uint64 // command id (VkCommandTypeEXT, ggml-rpc command byte); 0 for a reply without one
	Name     string // command name, "" when the id is unknown to the spec; replies carry their request's name
	Size     int64  // bytes of the frame, header included
	Status   int    // a reply's status, when the protocol has one (HTTP's 200, 404); 0 otherwise
	Calls    int    // system calls (or tracer events) that carried part of the frame
	// Digest is, on a request that wants a reply, a hash of its bytes that were captured (its
	// first line, for a text protocol), request ids left out: two requests of one connection
	// with the same Digest and Size showed the same bytes. 0 when none were seen. Digests are
	// compared within one run of perflab, never stored.
	Digest uint64

	WantsReply bool // a request that the protocol answers
	IsReply    bool // a reply to an earlier request, or a push
	// Push marks a message a server sent of its own accord, answering no request: a Redis
	// pub/sub message (or a further subscription confirmation) on a subscribed connection, a
	// RESP3 push. IsReply is also set, as on every message the server sends, but a push has no
	// RTT and is never counted unpaired.
	Push bool
	// Blocks marks a request, and the reply that answers it, that waits on the server for data
	// by its arguments rather than its name: Redis's XREAD and XREADGROUP with BLOCK among the
	// arguments captured. Its round trip lasts until data comes or the client's timeout ends.
	Blocks bool
	ReqID  uint64 // request id when the protocol (or tracer) has one, 0 otherwise
	// RTT is, on a reply paired with its request, the time from the start of the request to the
	// end of the reply, ns; 0 when unknown. ReqTS is the request's start.
	RTT   int64
	ReqTS int64
	// ReqEnd is, on a paired reply, the end of the request's last call: when a server had
	// received all of it. A server's service time runs from ReqEnd to TS (the reply's first
	// byte sent) or End (its last).
	ReqEnd int64
	// FirstEnd is the end of the first call that carried the frame: on a received reply, when
	// its first bytes were in (time to first byte = FirstEnd - ReqTS). 0 when unknown.
	FirstEnd int64
	// CallNS is the time spent inside the calls that carried the frame, ns: on a server's
	// received request, the blocking read's wait for it included.
	CallNS int64
	// Answered is how many requests a reply answered: 1 usually, more when a server batches
	// the replies to several requests (records) into one frame; RTT is the first one's.
	Answered int

	// Batch lists, on a request frame of a protocol whose frames carry several commands
	// (venus-mesa), the commands found in it; nil otherwise.
	Batch *Batch

	Truncated bool // the frame's end was not seen (the trace or connection ended inside it)
	LostSync  bool // the decoder lost the frame boundaries before this frame and resynchronised here

	spec *Spec // the decoder's spec
}

// Duration returns End - TS in ns.
func (m *Message) Duration() int64 { return m.End - m.TS }
