// Package merge puts recordings of one system made on several hosts onto one timeline: it
// matches each connection's two ends (mirrored local and remote addresses) and each message's two
// ends (TCP and unix streams by byte offset, datagrams by order), bounds the clock offset and
// drift between the hosts from the messages in both directions (a one-way delay cannot be
// negative), and writes a merged trace that carries the correction (docs/merge.md).
package merge
