package runner

import (
	"os"
	"testing"
)

// TestMain lets the test binary be the oci backend's helper and the
// Runner's confined tasks, as the kndl binary is.
func TestMain(m *testing.M) {
	if code, ok := RunHelper(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
