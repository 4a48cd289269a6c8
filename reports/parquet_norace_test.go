//go:build !race

package reports

// raceEnabled: the race detector multiplies a process's memory, so RSS bounds do not apply.
const raceEnabled = false
