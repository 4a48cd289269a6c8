//go:build race

package export

// raceEnabled: the race detector multiplies a process's memory, so RSS bounds do not apply.
const raceEnabled = true
