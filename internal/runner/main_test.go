package runner

import (
	"os"
	"testing"

	"kndl.dev/kndl/internal/sandbox/oci"
)

// TestMain lets the test binary be the oci backend's helper, as the kndl
// binary is, for the tests that run a real Sandbox.
func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
