//go:build race

package cli

// raceEnabled reports that the race detector is on: the venusd-driven validation tests, whose
// runs take several times longer under it, are skipped there (they run without -race).
const raceEnabled = true
