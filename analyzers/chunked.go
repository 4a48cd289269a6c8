package analyzers

import "unsafe"

// chunkLen is the most entries in one block of a chunked list: 16Ki entries, so a list grows
// without ever copying what it holds (a doubling slice would briefly hold 3×).
const chunkLen = 1 << 14

// chunked is an append-only list stored in blocks that never move: pointers to its entries
// stay valid as it grows.
type chunked[T any] struct {
	blocks [][]T
	n      int
}

// add appends v and returns a pointer to the stored copy, valid until reset.
func (c *chunked[T]) add(v T) *T {
	if len(c.blocks) == 0 || len(c.blocks[len(c.blocks)-1]) == cap(c.blocks[len(c.blocks)-1]) {
		// blocks double from 64 entries up to chunkLen, so that a short list stays small
		c.blocks = append(c.blocks, make([]T, 0, min(chunkLen, max(64, c.n))))
	}
	b := &c.blocks[len(c.blocks)-1]
	*b = append(*b, v)
	c.n++
	return &(*b)[len(*b)-1]
}

// reset empties the list and lets its memory go.
func (c *chunked[T]) reset() { c.blocks, c.n = nil, 0 }

var _ [24 - unsafe.Sizeof(msgRec{})]struct{} // msgRec stays 24 bytes

// each calls fn with a pointer to every entry in order; with free, each block is let go once
// fn has seen it, and the list is empty afterwards.
func (c *chunked[T]) each(free bool, fn func(*T)) {
	for i, b := range c.blocks {
		for k := range b {
			fn(&b[k])
		}
		if free {
			c.blocks[i] = nil
		}
	}
	if free {
		c.reset()
	}
}

// len returns the number of entries.
func (c *chunked[T]) len() int { return c.n }

// connIndex finds values by connection id: ids small next to the number of connections (as
// recorders number them, 1, 2, 3, ...) in a slice, which a trace of many connections reads in
// order where a map would miss the cache on every lookup; the others (and the keys of
// connections without an id) in a map.
type connIndex[T comparable] struct {
	dense  []T
	sparse map[uint64]T
	n      int
}

// get returns key's value, or the zero value.
func (x *connIndex[T]) get(key uint64) T {
	var zero T
	if key < uint64(len(x.dense)) {
		if v := x.dense[key]; v != zero || len(x.sparse) == 0 {
			return v
		}
	}
	if len(x.sparse) == 0 {
		return zero
	}
	return x.sparse[key]
}

// put sets key's value, which must not be the zero value, for a key that has none.
func (x *connIndex[T]) put(key uint64, v T) {
	x.n++
	if key < uint64(len(x.dense)) {
		x.dense[key] = v
		return
	}
	if limit := uint64(4*x.n + 4096); key < limit {
		size := max(2*len(x.dense), int(key)+1, 64)
		size = min(size, int(limit))
		grown := make([]T, size)
		copy(grown, x.dense)
		x.dense = grown
		x.dense[key] = v
		return
	}
	if x.sparse == nil {
		x.sparse = map[uint64]T{}
	}
	x.sparse[key] = v
}
