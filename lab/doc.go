// Package lab runs load sweeps against a venusd server it starts itself (closed-loop ping
// clients over each transport, mode, depth and client count) and analyses them as seed 003
// does: RTT scaling, Little's law, the batch model and its predictions, and RTT populations.
package lab
