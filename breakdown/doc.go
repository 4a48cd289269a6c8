// Package breakdown splits each round trip of a merged two-host trace into the client's time,
// the network one way out, the server's queue wait, the server's service and the network one
// way back, parts that sum to the client's round-trip time. It takes decoded messages and the
// connections and clocks of a merged trace (package merge), matches each message's two ends
// (mirrored connection addresses, equal byte offsets in the stream) so that every message is
// counted once, and sums the parts per command and per unit of work (docs/merge.md).
package breakdown
