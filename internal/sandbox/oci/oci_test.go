package oci_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/sandbox/sandboxtest"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args); ok {
		os.Exit(code)
	}
	// The backend turns IPv4 forwarding on for good; tests put it back.
	fwd, _ := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	code := m.Run()
	if len(fwd) > 0 {
		os.WriteFile("/proc/sys/net/ipv4/ip_forward", fwd, 0o644)
	}
	os.Exit(code)
}

func TestConformance(t *testing.T) {
	base := requireOCI(t)
	port := freePort(t)
	sandboxtest.Run(t, func(t *testing.T, dir string) sandbox.Backend {
		return newBackend(t, oci.Options{StateDir: dir, RelayPort: port})
	}, base)
}

// requireOCI skips (or, under CI, fails) without what the backend needs,
// and returns the test base layer.
func requireOCI(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	return testkit.Rootfs(t)
}

// newBackend makes a backend, with the directories above its state
// directory made traversable (0711), as the backend requires.
func newBackend(t *testing.T, opts oci.Options) *oci.OCI {
	t.Helper()
	for p := filepath.Dir(opts.StateDir); p != filepath.Dir(p) && p != os.TempDir(); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	b, err := oci.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Logf("%s", p)
	return len(p), nil
}

func freePort(t *testing.T) uint16 {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}
