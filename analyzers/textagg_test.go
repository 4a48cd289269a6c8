package analyzers

import (
	"fmt"
	"testing"
)

// TestLowerBoundsByID: the "at least" warnings are those of the lowest connection ids, in id
// order, whatever order the decoder gives the connections in.
func TestLowerBoundsByID(t *testing.T) {
	var ta textAgg
	for _, id := range []uint64{40, 3, 17, 99, 1, 25, 8, 60, 2, 33, 71, 5, 90, 14, 11, 80, 7, 50, 4, 66} {
		ta.addLowerBound(id, fmt.Sprint(id))
	}
	want := []uint64{1, 2, 3, 4, 5, 7, 8, 11, 14, 17, 25, 33, 40, 50, 60, 66}
	if len(ta.atLeast) != len(want) {
		t.Fatalf("%d kept, want %d", len(ta.atLeast), len(want))
	}
	for i, w := range want {
		if got := ta.atLeast[i]; got.conn != w || got.text != fmt.Sprint(w) {
			t.Errorf("#%d: %+v, want connection %d", i, got, w)
		}
	}
}
