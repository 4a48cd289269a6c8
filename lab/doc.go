// Package lab runs load sweeps against a venusd server it starts itself (closed-loop ping
// clients over each transport, mode, depth and client count) and analyses the sweep: RTT
// scaling, Little's law, the batch model and its predictions, and RTT populations (the analysis
// of the benchkv key-value daemon in fixtures/seed003).
package lab
