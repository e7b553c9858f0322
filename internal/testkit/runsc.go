package testkit

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/sandbox/gvisor"
	"kndl.dev/kndl/internal/testenv"
)

// RunscPath is where scripts/install-packages builds runsc at
// gvisor.Version: in the test cache, one directory per build (gvisor.BuildID).
func RunscPath() string {
	return filepath.Join(CacheDir(), "runsc", gvisor.BuildID, "runsc")
}

// Runsc returns the runsc the gvisor backend's tests use, after checking it
// runs a Sandbox here (gvisor.Probe). It skips (under CI, fails) without
// one: scripts/install-packages builds it.
func Runsc(t testing.TB) string {
	t.Helper()
	testenv.RequireRoot(t)
	p := RunscPath()
	if _, err := os.Stat(p); err != nil {
		testenv.Lack(t, "runsc at "+p+" (scripts/install-packages builds it)")
	}
	if err := gvisor.Probe(context.Background(), p); err != nil {
		testenv.Lack(t, "a host where runsc runs a Sandbox ("+err.Error()+")")
	}
	return p
}
