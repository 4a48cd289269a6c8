//go:build race

package venusd

// raceEnabled reports that the race detector is on: it slows some goroutines far more than
// others, so timing ratios are logged, not asserted, under it.
const raceEnabled = true
