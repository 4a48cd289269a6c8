package analyzers

import "testing"

// TestFindModesFewFar: a few round trips far from the rest (5 BLPOPs of 200-300 ms among 100
// GETs of 7-10 µs, recorded from a Redis client) are a population of their own, which a fit
// started from equal shares of the mass gave to a wide component's tail, leaving one population
// whose range, 0.16 µs to 1.2 ms, held neither the fastest value nor the far ones. Every range
// lies within the values seen.
func TestFindModesFewFar(t *testing.T) {
	// the client's round trips, ns, in order: 50 GETs, 5 BLPOPs of an empty list with a timeout
	// of 0.2 s, 50 GETs
	rtts := []float64{
		189200, 15846, 9931, 8386, 8318, 8203, 8304, 8416, 9802, 8377, 8286, 8154, 8199, 8089, 8050,
		8032, 8080, 8050, 8073, 8122, 8351, 8032, 8054, 8059, 8161, 8247, 8094, 8089, 8015, 8034, 8109,
		8101, 8156, 8713, 14136, 8260, 8084, 7995, 7995, 8074, 8074, 8022, 7961, 8051, 8310, 8062, 7967,
		7909, 7999, 7981, 283008413, 301064753, 301178585, 200718389, 200880515, 45577, 10055, 8180,
		7617, 7593, 7644, 7446, 7454, 7471, 7697, 7540, 7501, 7438, 7495, 7498, 7535, 7492, 7447, 7643,
		7634, 7478, 7564, 8047, 7508, 7593, 7491, 7461, 7442, 7453, 7541, 7440, 7488, 7493, 7486, 7512,
		7488, 7560, 7625, 7422, 7483, 7459, 7581, 7421, 7455, 7440, 7425, 7455, 7500, 9425, 7646,
	}
	cs := make([]float64, len(rtts))
	for i := range cs {
		cs[i] = 1
	}
	vs := rtts
	modes := FindModes(vs, cs)
	if len(modes) != 2 {
		t.Fatalf("%d populations, want 2: %+v", len(modes), modes)
	}
	fast, far := modes[0], modes[1]
	if fast.CenterUS < 7400 || fast.CenterUS > 10000 || far.CenterUS < 200e6 || far.CenterUS > 302e6 {
		t.Errorf("centres %.0f and %.0f, want the GETs' and the BLPOPs'", fast.CenterUS, far.CenterUS)
	}
	if d := far.Share - 5.0/105; d > 0.005 || d < -0.005 {
		t.Errorf("far share %.3f, want 5/105", far.Share)
	}
	for _, m := range modes {
		if m.LowUS < 7421 || m.HighUS > 301178585 || m.LowUS > m.CenterUS || m.HighUS < m.CenterUS {
			t.Errorf("population %+v: range outside the values seen (7,421 to 301,178,585)", m)
		}
	}
}

// TestFindModesCentreSeen: a population's centre is the median of the values most likely its,
// so a value that was seen. GETs spread evenly over 7.4-9.8 µs with tails at 45 and 189 µs and
// five BLPOPs of 200-301 ms gave a second population whose centre, the exp of its mean on the
// logarithms, was 25 ms: no round trip took anything near it.
func TestFindModesCentreSeen(t *testing.T) {
	var vs []float64
	for i := 0; i < 100; i++ {
		vs = append(vs, 7400+float64(i)*24)
	}
	vs = append(vs, 45000, 189000, 200e6, 230e6, 260e6, 283e6, 301e6)
	cs := make([]float64, len(vs))
	seen := map[float64]bool{}
	for i, v := range vs {
		cs[i] = 1
		seen[v] = true
	}
	modes := FindModes(vs, cs)
	if len(modes) < 2 {
		t.Fatalf("%d populations: %+v", len(modes), modes)
	}
	for _, m := range modes {
		if !seen[m.CenterUS] {
			t.Errorf("population %+v: its centre is no value seen", m)
		}
		if m.CenterUS < m.LowUS || m.CenterUS > m.HighUS {
			t.Errorf("population %+v: its centre lies outside its range", m)
		}
	}
}

// TestFindModesOutlier: one slow round trip among 30 (a fresh connection's first request, 106
// µs among 14 µs) is 3.3% of them, above the share a population needs, but it is an outlier:
// a population holds at least three.
func TestFindModesOutlier(t *testing.T) {
	vs := []float64{106}
	for i := 0; i < 29; i++ {
		vs = append(vs, 13.8+0.03*float64(i))
	}
	cs := make([]float64, len(vs))
	for i := range cs {
		cs[i] = 1
	}
	if modes := FindModes(vs, cs); len(modes) != 1 {
		t.Errorf("%d populations %+v, want 1", len(modes), modes)
	}
	three := append(append([]float64{}, vs...), 104, 108) // three slow ones are a population
	if modes := FindModes(three, append(cs, 1, 1)); len(modes) != 2 {
		t.Errorf("three slow round trips: %d populations %+v, want 2", len(modes), modes)
	}
}
