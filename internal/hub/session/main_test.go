package session

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every
// Owner is closed, every fake Runner gone.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
