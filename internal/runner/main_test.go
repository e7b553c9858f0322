package runner

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"

	"kndl.dev/kndl/internal/sandbox/oci"
)

// TestMain lets the test binary be the oci backend's helper and the
// Runner's confined tasks, as the kndl binary is; it removes the Sandboxes
// an earlier test process, killed, left (oci.ReapTests), and fails the
// package when a goroutine outlives its tests (goleak).
func TestMain(m *testing.M) {
	if code, ok := RunHelper(os.Args, nil); ok {
		os.Exit(code)
	}
	oci.ReapTests(context.Background())
	goleak.VerifyTestMain(m)
}
