package runner

import (
	"context"
	"os"
	"testing"

	"kndl.dev/kndl/internal/sandbox/oci"
)

// TestMain lets the test binary be the oci backend's helper and the
// Runner's confined tasks, as the kndl binary is, and removes the
// Sandboxes an earlier test process, killed, left (oci.ReapTests).
func TestMain(m *testing.M) {
	if code, ok := RunHelper(os.Args); ok {
		os.Exit(code)
	}
	oci.ReapTests(context.Background())
	os.Exit(m.Run())
}
