// Package gvisor pins the runsc the gvisor backend (the oci backend with
// runsc as its runtime) is built and tested with, and probes whether a runsc
// runs Sandboxes on this host. It imports nothing of the backend, so the
// Runner, the tests' kit and scripts/install-packages share the one version.
package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Version is the gVisor module version scripts/install-packages builds runsc
// from (`go build gvisor.dev/gvisor/runsc`, into the test cache, where
// testkit.Runsc finds it); the script reads it from this line. To bump it:
// pick a commit of github.com/google/gvisor's "go" branch, take its
// pseudo-version (`go list -m gvisor.dev/gvisor@<commit>`; the module proxy
// refuses `@go`), set it here, run scripts/install-packages and the
// conformance suite on gVisor (TestConformanceGVisor in internal/sandbox/oci).
const Version = "v0.0.0-20260905035102-160fafc42237"

// BuildID names the build of Version scripts/build-runsc makes: the test
// cache keeps runsc under Version+BuildID, so a change to the build (the
// script or scripts/runsc-seccomp.go) gets a new one built. "+seccomp":
// the Sentry's and the gofer's seccomp programs are precompiled, as in
// gVisor's own release builds (about 25 ms of a Start, see
// docs/performance.md).
const BuildID = Version + "+seccomp"

// probeTimeout bounds Probe: a runsc that hangs (a platform that cannot
// run here) counts as one that does not work.
const probeTimeout = 20 * time.Second

// Probe reports whether runsc at path runs a Sandbox on this host: `runsc
// do /bin/true` on the systrap platform with no network, as root. The error
// says why not.
func Probe(ctx context.Context, path string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("runsc needs root")
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	root, err := os.MkdirTemp("", "kndl-runsc-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	cmd := exec.CommandContext(ctx, path, "--root", root, "--platform=systrap", "--network=none", "do", "/bin/true")
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		out = bytes.TrimSpace(out)
		if len(out) > 400 {
			out = out[len(out)-400:]
		}
		if len(out) == 0 {
			return fmt.Errorf("%s do /bin/true: %w", path, err)
		}
		return fmt.Errorf("%s do /bin/true: %w: %s", path, err, out)
	}
	return nil
}
