package protocol

// keyInts maps connection keys to small integers (at least -1): keys small next to the number
// stored (recorders number connections 1, 2, 3, ...) in a slice, which a trace of many
// connections reads in order where a map would miss the cache on every look-up; the others
// in a map.
type keyInts struct {
	dense  []int32 // value+2, 0 when none
	sparse map[uint64]int32
	n      int
}

// get returns key's value, and 0 and false when it has none.
func (x *keyInts) get(key uint64) (int, bool) {
	if key < uint64(len(x.dense)) {
		if v := x.dense[key]; v != 0 {
			return int(v) - 2, true
		}
	}
	if x.sparse == nil {
		return 0, false
	}
	if v, ok := x.sparse[key]; ok {
		return int(v) - 2, true
	}
	return 0, false
}

// set sets key's value, v >= -1.
func (x *keyInts) set(key uint64, v int) {
	if key < uint64(len(x.dense)) {
		if x.dense[key] == 0 {
			x.n++
		}
		x.dense[key] = int32(v + 2)
		return
	}
	if x.sparse != nil {
		if _, ok := x.sparse[key]; ok {
			x.sparse[key] = int32(v + 2)
			return
		}
	}
	x.n++
	// Grow the slice to hold key while it stays within a few times the keys stored, so that
	// a trace of a few keys with large numbers costs no more than the map.
	if limit := uint64(4*x.n + 4096); key < limit {
		size := min(max(2*len(x.dense), int(key)+1, 64), int(limit))
		grown := make([]int32, size)
		copy(grown, x.dense)
		x.dense = grown
		x.dense[key] = int32(v + 2)
		return
	}
	if x.sparse == nil {
		x.sparse = map[uint64]int32{}
	}
	x.sparse[key] = int32(v + 2)
}
