package merge

import (
	"errors"
	"reflect"
	"testing"

	"github.com/perflab/perflab/trace"
)

func ev(ts, dur, n int64) trace.Event { return trace.Event{TS: ts, Dur: dur, Bytes: n} }

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		name         string
		fam          trace.Family
		sends, recvs []trace.Event
		want         []Msg
	}{
		{"one to one", trace.FamilyTCP, []trace.Event{ev(10, 1, 100), ev(50, 1, 20)}, []trace.Event{ev(5, 10, 100), ev(40, 20, 20)},
			[]Msg{{10, 15}, {50, 60}}},
		{"one send read in two", trace.FamilyTCP, []trace.Event{ev(10, 1, 100)}, []trace.Event{ev(11, 1, 60), ev(13, 1, 40)},
			[]Msg{{10, 12}, {10, 14}}},
		{"two sends read at once", trace.FamilyTCP, []trace.Event{ev(10, 1, 30), ev(12, 1, 30)}, []trace.Event{ev(5, 10, 60)},
			[]Msg{{10, 15}, {12, 15}}},
		{"straddling", trace.FamilyTCP, []trace.Event{ev(1, 0, 10), ev(2, 0, 10)}, []trace.Event{ev(3, 0, 5), ev(4, 0, 10), ev(5, 0, 5)},
			[]Msg{{1, 3}, {1, 4}, {2, 4}, {2, 5}}},
		{"datagrams by order", trace.FamilyUDP, []trace.Event{ev(1, 0, 10), ev(2, 0, 99)}, []trace.Event{ev(3, 1, 10), ev(5, 1, 99), ev(9, 1, 5)},
			[]Msg{{1, 4}, {2, 6}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, _ := Messages(c.fam, c.sends, c.recvs)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestEstimateClockRefuses(t *testing.T) {
	for _, c := range []struct {
		name      string
		out, back []Msg
		want      error
	}{
		{"one direction", []Msg{{0, 10}, {1e9, 1e9 + 10}}, nil, ErrUnbounded},
		{"one instant", []Msg{{0, 10}}, []Msg{{20, 30}}, ErrUnbounded},
		// The host's clock would have to run backwards by 1 ms between two round trips a second apart.
		{"clock step", []Msg{{0, 10}, {1e9, 1e9 - 2e6 + 10}}, []Msg{{20, 30}, {1e9 - 2e6 + 20, 1e9 + 30}}, ErrInconsistent},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := EstimateClock(c.out, c.back)
			if !errors.Is(err, c.want) {
				t.Errorf("got %v, want %v", err, c.want)
			}
		})
	}
}

func TestEstimateClockExact(t *testing.T) {
	// Host clock = reference + 5000 ns; every message takes 100 ns each way; both ends of the run.
	var out, back []Msg
	for _, t0 := range []int64{0, 1e9} {
		out = append(out, Msg{Send: t0, Recv: t0 + 100 + 5000})
		back = append(back, Msg{Send: t0 + 200 + 5000, Recv: t0 + 300})
	}
	e, err := EstimateClock(out, back)
	if err != nil {
		t.Fatal(err)
	}
	if e.Offset < -5001 || e.Offset > -4999 || e.OffsetLo > -5000 || e.OffsetHi < -5000 {
		t.Errorf("offset %.1f [%.1f, %.1f], want -5000 inside", e.Offset, e.OffsetLo, e.OffsetHi)
	}
	if e.DriftLo > 0 || e.DriftHi < 0 || e.DriftHi-e.DriftLo > 1e-6 {
		t.Errorf("drift [%g, %g], want a sub-ppm interval around 0", e.DriftLo, e.DriftHi)
	}
}
