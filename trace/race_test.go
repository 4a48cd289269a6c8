//go:build race

package trace

// raceEnabled scales the long property tests down under the race detector, which they do not
// need (they are single-goroutine) and which makes them ten times slower. The full counts run in
// the plain `go test`.
const raceEnabled = true
