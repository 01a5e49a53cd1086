package swim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// goroutine swim starts must end by the time its owner's Close or Shutdown
// returns. All test files of the package share this one TestMain.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
