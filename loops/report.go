package loops

// Report is the event loops found in a trace. JSON field names are a contract (docs/design.md):
// durations in µs (fields ending _us) or s (_s), counts as integers.
type Report struct {
	Threads []Thread `json:"threads"`
	Notes   []string `json:"notes,omitempty"`
}

// Thread is one event-loop thread: its cycles, from one wait call to the next.
type Thread struct {
	Trace         int    `json:"trace"` // index of its trace
	PID           uint32 `json:"pid"`
	TID           uint32 `json:"tid"`
	WaitCall      string `json:"wait_call"`      // the wait call it makes most (epoll_wait, ...)
	Cycles        uint64 `json:"cycles"`         // complete cycles
	EmptyCycles   uint64 `json:"empty_cycles"`   // cycles that received no request (a timer, an accept, a partial read)
	Requests      uint64 `json:"requests"`       // requests received in complete cycles
	Replies       uint64 `json:"replies"`        // replies sent in complete cycles (requests answered)
	FailedWaits   uint64 `json:"failed_waits"`   // wait calls that returned an error (EINTR)
	OutsideCycles uint64 `json:"outside_cycles"` // requests received before its first wait call
	// DurationS is from the first cycle's start to the last one's end; BusyS and IdleS split it
	// into time outside and inside the wait calls; Utilization is BusyS/(BusyS+IdleS).
	DurationS      float64 `json:"duration_s"`
	BusyS          float64 `json:"busy_s"`
	IdleS          float64 `json:"idle_s"`
	Utilization    float64 `json:"utilization"`
	ThroughputPerS float64 `json:"throughput_per_s"` // requests over DurationS
	// RequestsPerCycle is N's mean over every cycle; RequestsPerBusyCycle over the cycles
	// that received at least one request.
	RequestsPerCycle     float64 `json:"requests_per_cycle"`
	RequestsPerBusyCycle float64 `json:"requests_per_busy_cycle"`
	// The active span, from the start of the first cycle that received a request to the end of
	// the last one (the idle time before and after left out): its length, its cycles (empty
	// ones included), their mean length (µs) and requests per cycle, so that
	// ActiveRequestsPerCycle/ActiveCycleUS is the thread's throughput while it served.
	ActiveS                float64 `json:"active_s"`
	ActiveCycles           uint64  `json:"active_cycles"`
	ActiveCycleUS          float64 `json:"active_cycle_us"`
	ActiveRequestsPerCycle float64 `json:"active_requests_per_cycle"`
	// MultiRequestCycles are the cycles that received two requests or more and sent a reply;
	// RepliesAtCycleEnd is the share of them that sent no reply before their last request was
	// read. A loop that writes its replies once a cycle's requests are all read (redis) has 1; one
	// that answers each connection as it reads it (memcached) has 0. Where it is 1, a request's
	// reply waits for the requests read after it in its cycle.
	MultiRequestCycles uint64  `json:"multi_request_cycles"`
	RepliesAtCycleEnd  float64 `json:"replies_at_cycle_end"`
	// CycleUS is the loop time (wait call start to the next one's start); BusyUS the part after
	// the wait call returned.
	CycleUS Quantiles `json:"cycle_us"`
	BusyUS  Quantiles `json:"busy_us"`
	// Phases split every cycle into wait, read, process and write (seed 003's phase table).
	Phases []Phase `json:"phases"`
	// ByN groups the cycles by the requests they received.
	ByN []NCycles `json:"by_n"`
	// Fit is the batch model of the busy time, T_busy = T_fixed + T_per_req·N, over the cycles
	// that received requests; Ranges is T_per_req by N range. Nil when N did not vary.
	Fit      *Fit     `json:"batch_fit,omitempty"`
	Ranges   []NRange `json:"t_per_req_by_n,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// Quantiles summarise a duration, µs.
type Quantiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// Phase is one phase of the cycles: its distribution per cycle (µs) and its share of the
// thread's time.
type Phase struct {
	Phase string `json:"phase"` // wait, read, process, write
	Quantiles
	Share float64 `json:"share"`
}

// NCycles is the cycles that received N requests: how many, and their mean busy and whole
// time, µs; PathUS is the mean part of the busy time up to the end of the cycle's last send
// (its replies out; the whole busy time in a cycle that sent nothing), the rest being the loop's
// own work after replying.
type NCycles struct {
	N       int     `json:"n"`
	Cycles  uint64  `json:"cycles"`
	BusyUS  float64 `json:"busy_us"`
	CycleUS float64 `json:"cycle_us"`
	PathUS  float64 `json:"path_us"`
}

// Fit is a batch model T = T_fixed + T_per_req·N with confidence intervals, µs.
type Fit struct {
	TFixedUS  float64    `json:"t_fixed_us"`
	TPerReqUS float64    `json:"t_per_req_us"`
	TFixedCI  [2]float64 `json:"t_fixed_ci_us"`
	TPerReqCI [2]float64 `json:"t_per_req_ci_us"`
	CILevel   float64    `json:"ci_level"`
	R2        float64    `json:"r2"`
	Points    int        `json:"points"` // distinct N (or sweep points) fitted
	// ThroughputMaxPerS is the limit 1/T_per_req as N grows, requests/s (0 when T_per_req is
	// not positive).
	ThroughputMaxPerS float64 `json:"throughput_max_per_s"`
}

// NRange is the effective T_per_req over a range of N: (mean T − T_fixed)/mean N (seed 003
// §5.4's load-dependent refinement), µs.
type NRange struct {
	NFrom     int     `json:"n_from"`
	NTo       int     `json:"n_to"`
	Cycles    uint64  `json:"cycles"`
	MeanN     float64 `json:"mean_n"`
	MeanUS    float64 `json:"mean_us"`
	TPerReqUS float64 `json:"t_per_req_us"`
}
