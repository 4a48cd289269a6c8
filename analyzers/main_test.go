package analyzers

import (
	"testing"

	"go.uber.org/goleak"
)

// The analyses are sequential; the benchmark samples the heap from a goroutine that must end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
