package models

// LittlesLaw relates the mean number of requests in a system L, the throughput λ and the mean
// time in the system W: L = λ·W. It holds for any stable system over a long enough window.

// InFlight returns L = λ·W: the mean requests in flight, for a throughput in requests/s and a
// mean response time in µs.
func InFlight(throughputPerS, responseUS float64) float64 {
	return throughputPerS * responseUS / 1e6
}

// ResponseTime returns W = L/λ in µs, for L requests in flight and a throughput in requests/s.
// It is 0 when the throughput is not positive.
func ResponseTime(inflight, throughputPerS float64) float64 {
	if throughputPerS <= 0 {
		return 0
	}
	return inflight / throughputPerS * 1e6
}

// Throughput returns λ = L/W in requests/s, for L requests in flight and a mean response time
// in µs. It is 0 when the response time is not positive.
func Throughput(inflight, responseUS float64) float64 {
	if responseUS <= 0 {
		return 0
	}
	return inflight / responseUS * 1e6
}
