package protocol

import (
	"slices"

	"github.com/perflab/perflab/trace"
)

// CipherFilter finds the connections whose system calls carry TLS ciphertext, in a trace that
// holds TLS plaintext: a connection whose first data is a TLS record (content type 20 to 23,
// version 3.x) carries ciphertext; a first call that moved fewer than 3 bytes of such a record
// (a peek) is taken as ciphertext and the next one decides. Without plaintext in the trace it finds none, so a TLS
// connection recorded without --tls is decoded as before (raw).
type CipherFilter struct {
	on   bool
	seen map[uint64]bool // connKey -> carries ciphertext
}

// NewCipherFilter returns the filter of a trace with meta.
func NewCipherFilter(meta trace.Meta) *CipherFilter {
	return &CipherFilter{on: slices.Contains(meta.Probes, trace.ProbeTLS), seen: map[uint64]bool{}}
}

// Cipher reports whether ev is a system call that moved TLS ciphertext.
func (f *CipherFilter) Cipher(ev *trace.Event) bool {
	return f.on && f.cipher(ev) // inline: a trace without plaintext costs no call
}

func (f *CipherFilter) cipher(ev *trace.Event) bool {
	if ev.Op.UserSpace() || ev.Source != trace.SourceEBPF || ev.Errno != 0 || ev.Bytes <= 0 {
		return false
	}
	key := connKey(ev)
	c, ok := f.seen[key]
	if !ok {
		p := ev.Payload
		c = len(p) >= 1 && p[0] >= 20 && p[0] <= 23 && (len(p) < 2 || p[1] == 3) && (len(p) < 3 || p[2] <= 4)
		if c && len(p) < 3 {
			return true // a peek at a record's first byte (nginx peeks one): TLS so far, not decided yet
		}
		f.seen[key] = c
	}
	return c
}
