package analyzers

import (
	"fmt"
	"iter"
	"os"
	"unsafe"
)

// DefaultRecordMemory is how many bytes of per-message records (and blocked and receive
// intervals) analyze holds in memory by default before it moves the older ones to a temporary
// file: 64 MiB, the records of about 2.8 million messages, so that a trace of up to a few
// million events never touches the disk and a longer one runs in bounded memory.
const DefaultRecordMemory = 64 << 20

// recBudget is the memory the spill lists of one analysis share, in bytes.
type recBudget struct {
	limit   int64 // bytes of entries held in memory before the older ones are spilled; < 0: no limit
	used    int64 // bytes of entries' blocks in memory
	peak    int64 // the most used has been
	spilled int64 // bytes written to temporary files, in all
	err     error // the first error making or writing a temporary file: the rest stays in memory
	readErr error // the first error reading one back: a pass ended early
}

// blockLen is the most entries of esize bytes in one block of a list under a limit: chunkLen,
// and no more than an eighth of the budget (at least 64), so that a small budget holds.
func (b *recBudget) blockLen(esize int64) int64 {
	return min(chunkLen, max(64, b.limit/8/esize))
}

// spillList is an append-only list of fixed-size entries without pointers, kept in blocks
// (chunked) while its budget allows, its oldest blocks moved to an unlinked temporary file
// beyond that and read back, in order, by each pass over it. The newest two blocks always stay
// in memory, so a pointer to the last entry added stays valid until the next one.
type spillList[T any] struct {
	mem    chunked[T] // the newest entries; the length of its last block is tail's
	tail   []T        // the last block of mem, appended to in place
	budget *recBudget
	file   *os.File // the oldest entries, in order (nil until the first spill)
	nFile  int      // entries in file
	buf    []T      // read buffer of a pass over the file
	passes int      // passes that read the file
	free   [][]T    // blocks written to the file, kept (and still counted in the budget) for reuse
}

// add appends v and returns a pointer to the stored copy, valid until the next add or reset.
func (l *spillList[T]) add(v T) *T {
	if n := len(l.tail); n < cap(l.tail) {
		l.tail = l.tail[:n+1]
		l.tail[n] = v
		l.mem.n++
		return &l.tail[n]
	}
	return l.grow(v)
}

// next appends a zero entry and returns a pointer to it, valid as add's.
func (l *spillList[T]) next() *T {
	if n := len(l.tail); n < cap(l.tail) {
		l.tail = l.tail[:n+1]
		l.mem.n++
		p := &l.tail[n]
		var zero T
		*p = zero
		return p
	}
	var zero T
	return l.grow(zero)
}

// sync gives the last block of mem the length of tail.
func (l *spillList[T]) sync() {
	if c := &l.mem; len(c.blocks) > 0 {
		c.blocks[len(c.blocks)-1] = l.tail
	}
}

// grow is add when the last block is full (or there is none): it starts a block, after
// spilling the older ones when the budget is reached. Blocks grow as chunked's do, but to no
// more than blockLen.
func (l *spillList[T]) grow(v T) *T {
	l.sync()
	c := &l.mem
	esize := int64(unsafe.Sizeof(v))
	n := int64(min(chunkLen, max(64, c.n)))
	var blk []T
	if b := l.budget; b != nil {
		if b.limit >= 0 {
			n = min(n, b.blockLen(esize))
			if len(l.free) == 0 && b.used+n*esize > b.limit && len(c.blocks) >= 2 && b.err == nil {
				l.spill()
			}
		}
		if k := len(l.free); k > 0 && int64(cap(l.free[k-1])) == n {
			// a block already written to the file, its memory still counted: reusing it
			// spares allocating, zeroing and collecting one
			blk = l.free[k-1][:1]
			l.free[k-1] = nil
			l.free = l.free[:k-1]
		} else {
			b.used += n * esize
			b.peak = max(b.peak, b.used)
		}
	}
	if blk == nil {
		blk = make([]T, 1, n)
	}
	blk[0] = v
	c.blocks = append(c.blocks, blk)
	l.tail = blk
	c.n++
	return &l.tail[0]
}

// spill writes every block in memory but the newest to the file; the full-sized ones are kept
// for grow to reuse (their memory still counted in the budget), the others let go.
func (l *spillList[T]) spill() {
	c := &l.mem
	if l.file == nil {
		f, err := os.CreateTemp("", "perflab-analyze-*")
		if err != nil {
			l.budget.err = fmt.Errorf("create spill file: %w", err)
			return
		}
		os.Remove(f.Name()) // unlinked: the space is freed when it is closed, whatever happens
		l.file = f
	}
	keep := len(c.blocks) - 1
	var size T
	for i, blk := range c.blocks[:keep] {
		if len(blk) == 0 {
			continue
		}
		if _, err := l.file.Write(asBytes(blk)); err != nil {
			l.budget.err = fmt.Errorf("write spill file: %w", err)
			c.blocks = c.blocks[i:]
			return
		}
		n := int64(unsafe.Sizeof(size))
		l.budget.spilled += n * int64(len(blk))
		l.nFile += len(blk)
		c.blocks[i] = nil
		if l.budget.limit >= 0 && int64(cap(blk)) == l.budget.blockLen(n) {
			l.free = append(l.free, blk[:0]) // a full-sized block: grow reuses it, still counted
			continue
		}
		l.budget.used -= n * int64(cap(blk))
	}
	c.blocks = append(c.blocks[:0], c.blocks[keep])
}

// asBytes returns the memory of s as bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var v T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(v)))
}

// len returns the number of entries.
func (l *spillList[T]) len() int { return l.mem.n }

// all yields every entry in the order added: those of the file (read back a block at a
// time), then those in memory. An error reading the file ends the pass early and is kept in
// the budget (readErr), to be reported.
func (l *spillList[T]) all() iter.Seq[*T] {
	return func(yield func(*T) bool) {
		for blk := range l.chunks() {
			for k := range blk {
				if !yield(&blk[k]) {
					return
				}
			}
		}
	}
}

// chunks yields the entries of all, a block at a time (a block read back from the file is
// valid until the next one is yielded).
func (l *spillList[T]) chunks() iter.Seq[[]T] {
	return func(yield func([]T) bool) {
		l.sync()
		if l.nFile > 0 {
			l.passes++
			if l.buf == nil {
				l.buf = make([]T, chunkLen)
			}
			var v T
			size := int64(unsafe.Sizeof(v))
			for off := 0; off < l.nFile; {
				n := min(len(l.buf), l.nFile-off)
				if _, err := l.file.ReadAt(asBytes(l.buf[:n]), int64(off)*size); err != nil {
					if l.budget.readErr == nil {
						l.budget.readErr = fmt.Errorf("read spill file: %w", err)
					}
					return
				}
				if !yield(l.buf[:n]) {
					return
				}
				off += n
			}
		}
		for _, blk := range l.mem.blocks {
			if len(blk) > 0 && !yield(blk) {
				return
			}
		}
	}
}

// reset empties the list, gives its blocks' memory back to the budget and closes its file.
func (l *spillList[T]) reset() {
	if l.budget != nil {
		var v T
		for _, blk := range l.mem.blocks {
			l.budget.used -= int64(unsafe.Sizeof(v)) * int64(cap(blk))
		}
		for _, blk := range l.free {
			l.budget.used -= int64(unsafe.Sizeof(v)) * int64(cap(blk))
		}
	}
	l.free = nil
	l.mem.reset()
	l.tail = nil
	if l.file != nil {
		l.file.Close()
		l.file = nil
	}
	l.nFile, l.buf = 0, nil
}
