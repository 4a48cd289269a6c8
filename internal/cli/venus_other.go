//go:build !linux

package cli

// venus and bench serve venusd through Linux interfaces (timerfd, futex, memfd, SO_PEERCRED):
// on other systems they are listed and say that they need Linux.
func init() {
	Register(venusCommand())
	Register(benchCommand())
}
