package analyzers

import "testing"

// TestBlockedPipelined: a client's blocked time is the union of its round trips' spans, never
// more than the time they cover, whatever order the replies complete in. Pipelined requests
// complete in reply order, so a round trip that began before an interval already closed
// must not stretch the next interval back over it (that counted 0.58 s blocked in a
// 0.068 s trace of a pipelined llm run).
func TestBlockedPipelined(t *testing.T) {
	for _, tc := range []struct {
		name string
		rts  [][2]int64 // (from, to) in completion order
		want int64
	}{
		{"serial", [][2]int64{{0, 10}, {20, 30}, {40, 50}}, 30},
		{"overlapping", [][2]int64{{0, 10}, {5, 15}, {12, 20}}, 20},
		{"late reply of an early request", [][2]int64{{0, 10}, {20, 30}, {5, 40}}, 40},
		{"early request within counted time", [][2]int64{{0, 10}, {20, 30}, {2, 8}}, 20},
		{"pipelined burst", [][2]int64{{0, 100}, {1, 101}, {200, 300}, {2, 301}, {3, 302}}, 302},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := newAnalyzer(Options{})
			if err != nil {
				t.Fatal(err)
			}
			p := &procAgg{}
			for _, rt := range tc.rts {
				a.roundTrip(p, nil, rt[0], rt[1])
			}
			p.closeBlock(a)
			if p.blocked != tc.want {
				t.Errorf("blocked %d ns, want %d", p.blocked, tc.want)
			}
			var sum int64
			for iv := range a.blocks.all() {
				sum += iv.to - iv.from
			}
			if sum != p.blocked {
				t.Errorf("blocked intervals sum to %d ns, blocked time %d", sum, p.blocked)
			}
		})
	}
}
