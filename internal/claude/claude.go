// Package claude is what kndl knows about running Claude Code: the pinned
// version and installing its Linux build from the npm registry, seeding its
// config dir so it starts with no dialog, its command line and environment,
// and where it writes its transcript. The Runner imports it; it runs nothing
// itself.
package claude

import (
	"fmt"

	"kndl.dev/kndl/internal/errdefs"
)

// Version is the pinned Claude Code version every Sandbox runs.
//
// To move it, run scripts/pin-claude VERSION (docs/claude-code.md,
// "Moving the pinned Claude Code"): it probes the version's models into
// models.json, runs the smoke test, and only when both pass rewrites this
// line, the integrity below and the table. Then re-check what /work/shared/notes/claude-code.md records
// against the new build and run the real-binary tests:
//
//	KNDL_E2E=1 go test -run Real ./internal/claude/
const Version = "2.1.328"

// The sha512 integrity of each build's npm tarball of Version, pinned here
// beside it: Install checks the bytes against these, never against what
// the registry serving them (RUNNER_NPM_REGISTRY, any mirror) says. Read
// them from npm's own registry (scripts/pin-claude does):
//
//	npm view @anthropic-ai/claude-code-linux-x64@VERSION dist.integrity
//	npm view @anthropic-ai/claude-code-linux-x64-musl@VERSION dist.integrity
const (
	glibcIntegrity = "sha512-KuzL+dBHgDCFTHJxwW+xuBJdVKfBsesGx2BBcTOG9sYDGoAD7b1hUV8rsTS4xjoJsB2SmeGraGjBiFuhrYuC9w=="
	muslIntegrity  = "sha512-JiYOp70eNGo+NQGwfPOyzupUf4rVjXd2cXpyF1elbp97mR22tagM7qlCQ/8jGrKSce82/ZKkyXQo39IsQjnNLQ=="
)

// Paths inside a Sandbox.
const (
	// MountDir is where the installed build is mounted read-only; the
	// binary is MountDir/claude.
	MountDir = "/opt/kndl/claude-code"
	// ConfigDir is CLAUDE_CONFIG_DIR, on the Session's own disk.
	ConfigDir = "/var/lib/kndl/claude"
	// Workdir is where Claude Code runs: the Session's clone.
	Workdir = "/workspace"
)

// Variant is the C library the build is linked against, chosen per Build
// from its image.
type Variant string

const (
	Glibc Variant = "glibc" // Debian, Ubuntu and the like
	Musl  Variant = "musl"  // Alpine and the like
)

// Package is the npm package holding the Linux x64 build for v.
func (v Variant) Package() string {
	if v == Musl {
		return "@anthropic-ai/claude-code-linux-x64-musl"
	}
	return "@anthropic-ai/claude-code-linux-x64"
}

func (v Variant) check() error {
	if v != Glibc && v != Musl {
		return fmt.Errorf("claude code variant %q: want %q or %q: %w", string(v), Glibc, Musl, errdefs.ErrInvalid)
	}
	return nil
}
