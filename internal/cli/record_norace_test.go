//go:build !race

package cli

// recordRaceBuild is set when the tests run under the race detector (see record_race_test.go).
const recordRaceBuild = false
