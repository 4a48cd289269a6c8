package analyzers

import "unsafe"

// chunkLen is the number of entries in one block of a chunked list: 16Ki entries, so a list
// grows without ever copying what it holds (a doubling slice would briefly hold 3×).
const chunkLen = 1 << 14

// chunked is an append-only list stored in fixed blocks.
type chunked[T any] struct {
	blocks [][]T
	n      int
}

// add appends v and returns a pointer to the stored copy, valid until reset.
func (c *chunked[T]) add(v T) *T {
	if len(c.blocks) == 0 || len(c.blocks[len(c.blocks)-1]) == chunkLen {
		c.blocks = append(c.blocks, make([]T, 0, chunkLen))
	}
	b := &c.blocks[len(c.blocks)-1]
	*b = append(*b, v)
	c.n++
	return &(*b)[len(*b)-1]
}

// reset empties the list and lets its memory go.
func (c *chunked[T]) reset() { c.blocks, c.n = nil, 0 }

var _ [24 - unsafe.Sizeof(msgRec{})]struct{} // msgRec stays 24 bytes
