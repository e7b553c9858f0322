package runner

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain lets the test binary be the oci backend's helper and the
// Runner's confined tasks, as the kndl binary is; as the tests, it fails
// the package when a goroutine outlives them (goleak).
func TestMain(m *testing.M) {
	if code, ok := RunHelper(os.Args); ok {
		os.Exit(code)
	}
	goleak.VerifyTestMain(m)
}
