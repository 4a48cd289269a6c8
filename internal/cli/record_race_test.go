//go:build race

package cli

// recordRaceBuild is set when the tests run under the race detector, which slows the recorded
// programs about tenfold: the heavy record tests then use fewer messages (the runs without
// -race check the full counts).
const recordRaceBuild = true
