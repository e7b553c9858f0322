package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"

	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/gvisor"
	"kndl.dev/kndl/internal/sandbox/oci"
)

// What each backend adds over the other, for the Runner's start log.
const (
	gvisorAdds = "gVisor would put a kernel of its own (the Sentry) between every Session and the host's kernel, so a kernel bug is not a way out"
	crunAdds   = "crun would start Sandboxes faster and share the host's kernel with them (a Session's system calls reach the host kernel, within seccomp)"
)

// backendChoice is the sandbox backend a Runner runs, and why.
type backendChoice struct {
	runtime string // oci.Options.Runtime: "runsc" or "crun"
	path    string // the runtime's binary; "" looks it up on PATH
	why     string
	other   string // what the other backend would add
}

// chooseBackend picks the backend: the one RUNNER_SANDBOX_BACKEND names,
// or, with it unset, gVisor where runsc (RUNNER_RUNSC, or on PATH) runs a
// Sandbox on this host (gvisor.Probe), else crun. gvisor asked for and not
// working here is an error, never crun in its place.
func chooseBackend(ctx context.Context, cfg runner.Config) (backendChoice, error) {
	if cfg.SandboxBackend == "crun" {
		return backendChoice{runtime: "crun", why: "RUNNER_SANDBOX_BACKEND=crun", other: gvisorAdds}, nil
	}
	path, err := findRunsc(cfg.Runsc)
	if err == nil {
		err = gvisor.Probe(ctx, path)
	}
	switch {
	case err == nil && cfg.SandboxBackend == "gvisor":
		return backendChoice{runtime: "runsc", path: path, why: "RUNNER_SANDBOX_BACKEND=gvisor", other: crunAdds}, nil
	case err == nil:
		return backendChoice{runtime: "runsc", path: path, why: "runsc at " + path + " runs Sandboxes on this host", other: crunAdds}, nil
	case cfg.SandboxBackend == "gvisor":
		return backendChoice{}, fmt.Errorf("RUNNER_SANDBOX_BACKEND=gvisor: %w", err)
	}
	return backendChoice{runtime: "crun", why: "no gVisor here (" + err.Error() + ")", other: gvisorAdds}, nil
}

// findRunsc returns runsc's path: RUNNER_RUNSC, or runsc on PATH.
func findRunsc(fromEnv string) (string, error) {
	if fromEnv != "" {
		if !filepath.IsAbs(fromEnv) {
			return "", fmt.Errorf("RUNNER_RUNSC=%q: want an absolute path", fromEnv)
		}
		if _, err := exec.LookPath(fromEnv); err != nil {
			return "", fmt.Errorf("RUNNER_RUNSC=%s: no runsc there: %w", fromEnv, err)
		}
		return fromEnv, nil
	}
	p, err := exec.LookPath("runsc")
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("no runsc in RUNNER_RUNSC or on PATH; build it with go build gvisor.dev/gvisor/runsc@%s", gvisor.Version)
	}
	return p, err
}

// newBackend makes the Runner's sandbox backend and says in the log which
// it is and why, and what this host can and cannot enforce.
func newBackend(ctx context.Context, cfg runner.Config, log *slog.Logger) (sandbox.Backend, error) {
	c, err := chooseBackend(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("sandbox backend: %w", err)
	}
	b, err := oci.New(ctx, ociOptions(cfg, c, log))
	if err != nil {
		return nil, fmt.Errorf("sandbox backend: %w", err)
	}
	h := b.Host()
	log.Info("sandbox backend ready", "backend", b.Name(), "why", c.why, "other", c.other,
		"enforces", h.Limits, "max_cpus", h.MaxCPUs, "max_memory_mib", h.MaxMemoryMiB, "relay", h.Relay)
	if h.DiskLimit != "" && h.MaxDiskMiB > 0 {
		log.Info("sandbox backend: disk use limited", "max_disk_mib", h.MaxDiskMiB, "how", h.DiskLimit)
	}
	for _, n := range h.Notes {
		log.Warn("sandbox backend: " + n)
	}
	return b, nil
}

// ociOptions are the backend's options for runtime c on the Runner cfg
// configures.
func ociOptions(cfg runner.Config, c backendChoice, log *slog.Logger) oci.Options {
	return oci.Options{
		StateDir:     filepath.Join(cfg.Home, "sandboxes", oci.DirName(c.runtime)),
		Runtime:      c.runtime,
		RuntimePath:  c.path,
		RelayPort:    uint16(cfg.RelayPort),
		MaxCPUs:      cfg.MaxCPUs,
		MaxMemoryMiB: cfg.MaxMemoryMiB,
		MaxDiskMiB:   cfg.MaxDiskMiB,
		InitPath:     cfg.Binary,
		Logger:       log,
	}
}

// buildsOnCrun says whether Builds run on a crun backend of their own:
// RUNNER_BUILD_BACKEND=crun while Sessions run on gVisor. On crun
// Sessions, Builds are on crun already.
func buildsOnCrun(cfg runner.Config, sessions sandbox.Backend) bool {
	return cfg.BuildBackend == "crun" && sessions.Name() == "gvisor"
}

// newBuildBackend makes the backend Builds run on when it is not the
// Sessions' (buildsOnCrun); nil when it is. Both share the host's slots,
// networks and firewall (oci.Options.HostDir) and keep their Sandboxes
// apart, so a Build's layer is one a gVisor Session boots from.
func newBuildBackend(ctx context.Context, cfg runner.Config, sessions sandbox.Backend, log *slog.Logger) (sandbox.Backend, error) {
	if !buildsOnCrun(cfg, sessions) {
		return nil, nil
	}
	b, err := oci.New(ctx, ociOptions(cfg, backendChoice{runtime: "crun"}, log))
	if err != nil {
		return nil, fmt.Errorf("RUNNER_BUILD_BACKEND=crun: %w", err)
	}
	log.Info("Builds run on crun (RUNNER_BUILD_BACKEND=crun): the image's setup and the Bootstrap script share the host's kernel, within seccomp; Sessions run on gVisor")
	return b, nil
}
