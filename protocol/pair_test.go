package protocol

import (
	"slices"
	"testing"
)

// TestPairerOrder: which request each reply answers, by the pairer's rules, for requests
// queued with ids (or none) and hints.
func TestPairerOrder(t *testing.T) {
	type req struct {
		id uint64
		h  hint
	}
	yes := func(ids ...uint64) []req {
		var r []req
		for _, id := range ids {
			r = append(r, req{id, hintYes})
		}
		return r
	}
	tests := []struct {
		name    string
		reqs    []req
		replies []uint64 // the id each reply carries (0: none seen)
		want    []int    // the request (its index in reqs) each reply answers; -1: none
		waiting uint64   // requests hinted to want a reply still waiting at the end
	}{
		{"ids pair by id", yes(1, 2, 3), []uint64{3, 1, 2}, []int{2, 0, 1}, 0},
		{"no ids: oldest first", yes(0, 0, 0), []uint64{0, 0}, []int{0, 1}, 1},
		{"no id seen, nothing named: oldest first", yes(1, 2, 3), []uint64{0, 0}, []int{0, 1}, 1},
		// The reply to 1 lay past the captured head; 2's was seen with its id, the next ones
		// without: they follow 2, and 1 stays waiting instead of being paired with a later reply.
		{"no id seen after a named reply: after it", yes(1, 2, 3, 4, 5), []uint64{2, 0, 0, 5}, []int{1, 2, 3, 4}, 1},
		// Nothing waits after the named one: rule 3, the newest still waiting.
		{"nothing after the named reply: the newest waiting", yes(1, 2, 3), []uint64{3, 0}, []int{2, 1}, 1},
		{"hinted none: the newest unanswered", []req{{0, hintNo}, {0, hintNo}}, []uint64{0}, []int{1}, 0},
		// A request still waiting at the front (1) keeps the queue from being trimmed; those
		// hinted to want none behind it are taken as answered by nothing as replies pass them,
		// and the last reply, with no id and nothing after 5 to take, answers the newest left.
		{"hinted none behind a request still waiting", []req{{1, hintYes}, {0, hintNo}, {3, hintYes}, {0, hintNo}, {5, hintYes}},
			[]uint64{3, 5, 0}, []int{2, 4, 0}, 0},
		{"nothing to answer", nil, []uint64{0}, []int{-1}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var pr pairer
			for i, r := range tc.reqs {
				pr.add(pendingReq{ts: int64(i), reqID: r.id}, r.h)
			}
			var got []int
			for _, id := range tc.replies {
				p := pr.answer(id)
				if p == nil {
					got = append(got, -1)
					continue
				}
				got = append(got, int(p.ts))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("replies %v answered requests %v, want %v", tc.replies, got, tc.want)
			}
			if w := pr.waiting(); w != tc.waiting {
				t.Errorf("%d requests waiting, want %d", w, tc.waiting)
			}
		})
	}
}
