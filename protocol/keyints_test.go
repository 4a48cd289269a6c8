package protocol

import (
	"math/rand"
	"testing"
)

// TestKeyInts: keyInts holds what a map would, for keys numbered densely, sparsely, with the
// high bits that mark TLS plaintext and process streams, and keys stored before the slice
// grew over them.
func TestKeyInts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var x keyInts
	want := map[uint64]int{}
	keys := func() uint64 {
		switch rng.Intn(5) {
		case 0:
			return uint64(rng.Intn(1 << 20))
		case 1:
			return 1<<63 | uint64(rng.Intn(100))
		case 2:
			return 1<<62 | uint64(rng.Intn(100))
		}
		return uint64(rng.Intn(20000))
	}
	for i := 0; i < 200000; i++ {
		k := keys()
		if rng.Intn(2) == 0 {
			v := rng.Intn(300) - 1
			x.set(k, v)
			want[k] = v
		}
		got, ok := x.get(k)
		w, wok := want[k]
		if got != w || ok != wok {
			t.Fatalf("step %d: key %d: %d %v, want %d %v", i, k, got, ok, w, wok)
		}
	}
	for k, w := range want {
		if got, ok := x.get(k); !ok || got != w {
			t.Fatalf("key %d: %d %v, want %d", k, got, ok, w)
		}
	}
}
