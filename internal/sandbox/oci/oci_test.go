package oci_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestSmoke(t *testing.T) {
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	ctx := context.Background()
	b, err := oci.New(ctx, oci.Options{StateDir: stateDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", b.Host())
	if err := b.Create(ctx, sandbox.Spec{ID: "smoke", Layers: []string{base}}); err != nil {
		t.Fatal(err)
	}
	defer b.Remove(ctx, "smoke")
	if err := b.Start(ctx, "smoke"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p, err := b.Exec(ctx, "smoke", sandbox.Cmd{Args: []string{"sh", "-c", "id; cat /proc/self/uid_map; echo $FOO; grep Seccomp: /proc/self/status; cat /etc/hosts"}, Env: []string{"FOO=bar"}, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait()
	t.Logf("code=%d err=%v out=%s", code, err, out.String())
}

// stateDir is a state directory under t.TempDir(), whose directories are
// made traversable (0711) as the backend requires.
func stateDir(t *testing.T) string {
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(d, "state")
}
