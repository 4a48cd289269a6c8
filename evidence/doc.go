// Package evidence explains why round trips took the time they took, from the kernel evidence
// `perflab record` captures next to the messages (trace.OpRunnable, the TCP evidence ops) and
// from the messages themselves.
//
// It attributes each client round trip's time to causes: the client's own time before the
// request, sending it, waiting for the reply (network and server), retransmissions, the wake-up
// of a halted CPU and the run queue once the reply had arrived, and reading it. It keeps each
// TCP connection's statistics (srtt, cwnd, retransmissions, zero windows), set-up latency (as
// tcpconnlat) and lifetime (as tcplife), and it turns patterns into findings, each with its
// evidence, its cost per unit of work and the change that removes it.
//
// An Analyzer is fed in trace order: Begin for each trace, Event for every event, Connection,
// Request for every request message sent, RoundTrip for every reply a client received. Its
// memory grows with threads, connections and commands, never with the number of events.
package evidence
