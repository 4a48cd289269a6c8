//go:build !race

package cli

// raceEnabled reports that the race detector is on (see gate_race_test.go).
const raceEnabled = false
