// Package build makes Builds: an image made ready for Sessions on one
// Runner. It boots a Sandbox from the image's base without a Workspace,
// installs what Claude Code needs if the image lacks it, runs the Bootstrap
// script, reads the Login environment, and saves the Sandbox's writes as a
// layer Sessions boot from. Builds are keyed by the inputs that change them;
// the last few of each Repo are kept. Only internal/runner imports it.
package build

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
)

// recipe versions the steps below: bump it when they change what a Build
// holds, so every Runner builds afresh.
const recipe = "1"

// Spec is what a Build is made from.
type Spec struct {
	// Repo is the Repo the Build is for; the last Keep Builds of each are
	// kept.
	Repo string
	// ImageDigest and ImageRootfs are the pulled image: its identity and
	// its unpacked read-only base.
	ImageDigest string
	ImageRootfs string
	// ImageEnv is the image's configured environment.
	ImageEnv []string
	// Bootstrap is the Bootstrap script; empty for none.
	Bootstrap string
	// Env holds the Variables available at build (KEY=VALUE); their values
	// are part of the key.
	Env []string
	// Docker installs Docker with the image's package manager, if the
	// image has no dockerd.
	Docker bool
	// Features are installed in this order before the Bootstrap script
	// (features.go); FetchFeature gets each one's layer, a tar, only when
	// the Build is made.
	Features     []Feature
	FetchFeature func(ctx context.Context, ref string) ([]byte, error)
	// User is the Environment's user (a name or uid), whom Claude Code runs
	// as: the Features get it as _REMOTE_USER, the Build checks that the
	// image has it once the Bootstrap script ran, and the login
	// environment is its. Empty is root.
	User string
}

// Key is the Build's identity: every input that changes what it holds.
func (s Spec) Key() string {
	h := sha256.New()
	env := append([]string(nil), s.Env...)
	sort.Strings(env)
	parts := append([]string{recipe, s.ImageDigest, s.Bootstrap}, env...)
	// Only when on, so the keys of Builds made before it stay; no
	// Variable is named "docker:".
	if s.Docker {
		parts = append(parts, "docker:", "on")
	}
	// Likewise only when set; a count first keeps the list apart. Named
	// apart from Builds made before Features' containerEnv was set.
	if len(s.Features) > 0 {
		parts = append(parts, "features+containerEnv:", strconv.Itoa(len(s.Features)))
		for _, f := range s.Features {
			parts = append(parts, f.Ref, strconv.Itoa(len(f.Env)))
			parts = append(parts, f.Env...)
		}
	}
	// Likewise only when set, last.
	if s.User != "" {
		parts = append(parts, "user:", s.User)
	}
	for _, part := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Build is a finished Build.
type Build struct {
	Key  string `json:"key"`
	Repo string `json:"repo"`
	// Layers are the read-only layers Sessions boot from, topmost first:
	// the Build's own and the image's base. Not stored: they are where this
	// Runner's home is now.
	Layers []string `json:"-"`
	// Musl is whether the image's C library is musl, so Sandboxes take
	// Claude Code's musl build.
	Musl bool `json:"musl"`
	// LoginEnv is the environment an interactive login shell ended with,
	// probed with no Variable set.
	LoginEnv []string `json:"login_env"`
	// ImageEnv is the image's configured environment with its Features'
	// containerEnv, which a probe of the login environment starts from.
	ImageEnv []string `json:"image_env,omitempty"`
	// User is the Spec's user as the image's /etc/passwd has it; nil for
	// root.
	User      *User     `json:"user,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// User is a user of a Build's image.
type User struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Home string `json:"home"`
}

// LoginEnvPath is where a Build keeps its Login environment, inside.
const LoginEnvPath = "/var/lib/kndl/login-env.json"

// Builder makes and keeps Builds under its directory.
type Builder struct {
	backend sandbox.Backend
	dir     string
	keep    int
	log     *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // by key: one Build of a key at a time
}

// New makes a Builder keeping Builds under dir and the last keep of each
// Repo.
func New(backend sandbox.Backend, dir string, keep int, log *slog.Logger) (*Builder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if keep < 1 {
		keep = 1
	}
	return &Builder{backend: backend, dir: dir, keep: keep, log: log.With("component", "build"), locks: map[string]*sync.Mutex{}}, nil
}

func (b *Builder) lock(key string) func() {
	b.mu.Lock()
	l := b.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		b.locks[key] = l
	}
	b.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Ensure returns the Build for spec, making it if this Runner has none.
// progress gets a line per step and the scripts' output. A failed Build
// returns an error ending with the end of the failing step's output, and
// leaves nothing behind.
func (b *Builder) Ensure(ctx context.Context, spec Spec, progress func(string)) (Build, error) {
	key := spec.Key()
	defer b.lock(key)()
	if bd, err := b.load(key); err == nil {
		bd.Layers = b.layers(key, spec)
		progress("using the Build made " + bd.CreatedAt.Format(time.RFC3339) + " of these inputs")
		return bd, nil
	}
	start := time.Now()
	progress("building (a Build is made once per version, then reused)")
	bd, err := b.make(ctx, key, spec, progress)
	if err != nil {
		os.RemoveAll(filepath.Join(b.dir, key))
		return Build{}, err
	}
	progress(fmt.Sprintf("build ready in %s", time.Since(start).Round(100*time.Millisecond)))
	return bd, nil
}

func (b *Builder) layers(key string, spec Spec) []string {
	return []string{filepath.Join(b.dir, key, "layer"), spec.ImageRootfs}
}

func (b *Builder) load(key string) (Build, error) {
	raw, err := os.ReadFile(filepath.Join(b.dir, key, "build.json"))
	if err != nil {
		return Build{}, err
	}
	var bd Build
	return bd, json.Unmarshal(raw, &bd)
}

func (b *Builder) make(ctx context.Context, key string, spec Spec, progress func(string)) (Build, error) {
	dir := filepath.Join(b.dir, key)
	os.RemoveAll(dir) // a half-made Build from a crash
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Build{}, err
	}
	id := "build-" + key[:12]
	b.backend.Remove(ctx, id) // left by a crash mid-Build; ErrNotFound otherwise
	if err := b.backend.Create(ctx, sandbox.Spec{ID: id, Layers: []string{spec.ImageRootfs}}); err != nil {
		return Build{}, fmt.Errorf("build: create sandbox: %w", err)
	}
	defer b.backend.Remove(context.WithoutCancel(ctx), id)
	if err := b.backend.Start(ctx, id); err != nil {
		return Build{}, fmt.Errorf("build: start sandbox: %w", err)
	}
	bd := Build{Key: key, Repo: spec.Repo, ImageEnv: spec.ImageEnv, CreatedAt: time.Now()}
	s := step{backend: b.backend, id: id, env: spec.ImageEnv, progress: progress}

	out, _ := s.quiet(ctx, "sh", "-c", "ls /lib/ld-musl-* 2>/dev/null; command -v bash; command -v git; tmux -V 2>/dev/null; command -v dockerd; true")
	bd.Musl = strings.Contains(out, "ld-musl")
	if spec.Docker && !strings.Contains(out, "/dockerd") {
		progress("installing Docker (the Environment turns it on)")
		if err := s.run(ctx, nil, "sh", "-c", installScript([]string{dockerPackage})); err != nil {
			return Build{}, fmt.Errorf("build: install Docker: %w", err)
		}
		if _, err := s.quiet(ctx, "sh", "-c", "command -v dockerd"); err != nil {
			return Build{}, fmt.Errorf("build: the image's package manager installed Docker without dockerd: use an image whose packages have it (such as debian:12, whose docker.io does)")
		}
	}
	if missing := lacks(out); len(missing) > 0 {
		progress("installing " + strings.Join(missing, ", ") + " (Claude Code needs them)")
		if err := s.run(ctx, nil, "sh", "-c", installScript(missing)); err != nil {
			return Build{}, fmt.Errorf("build: install %s: %w", strings.Join(missing, ", "), err)
		}
	}
	if out, _ := s.quiet(ctx, "sh", "-c", "tmux -V"); !tmuxNewEnough(out) {
		return Build{}, fmt.Errorf("build: Claude Code needs tmux 3.2 or later and the image's package manager gave %q: use a newer image", strings.TrimSpace(out))
	}
	for _, f := range spec.Features {
		progress("installing the Feature " + f.Ref)
		env, err := s.feature(ctx, spec, f)
		if err != nil {
			return Build{}, fmt.Errorf("build: the Feature %s: %w", f.Ref, err)
		}
		s.env, bd.ImageEnv = env, env // with its containerEnv, as an image's own
	}
	if strings.TrimSpace(spec.Bootstrap) != "" {
		progress("running the Bootstrap script")
		env := append(append([]string(nil), s.env...), spec.Env...)
		if err := s.script(ctx, env, spec.Bootstrap); err != nil {
			return Build{}, fmt.Errorf("build: the Bootstrap script failed: %w", err)
		}
	}
	if spec.User != "" {
		u, ok, err := s.lookupUser(ctx, spec.User)
		switch {
		case err != nil:
			return Build{}, fmt.Errorf("build: read the image's users: %w", err)
		case !ok:
			return Build{}, fmt.Errorf("build: remoteUser, containerUser: the image has no user %q in /etc/passwd once its Features and the Bootstrap script ran: "+
				"name a user it has, or add this one (a Feature such as common-utils, or useradd in onCreateCommand): %w", spec.User, errdefs.ErrInvalid)
		}
		bd.User, s.user = &u, &u
		progress(fmt.Sprintf("Claude Code runs as %s (uid %d)", u.Name, u.UID))
	}
	progress("reading the login environment")
	login, err := s.loginEnv(ctx)
	if err != nil {
		return Build{}, fmt.Errorf("build: the login shell failed: %w", err)
	}
	bd.LoginEnv = login
	raw, _ := json.Marshal(login)
	if err := s.run(ctx, nil, "sh", "-c", "mkdir -p "+filepath.Dir(LoginEnvPath)+" && cat > "+LoginEnvPath, bytes.NewReader(raw)); err != nil {
		return Build{}, fmt.Errorf("build: save the login environment: %w", err)
	}
	if err := b.backend.Stop(ctx, id); err != nil {
		return Build{}, fmt.Errorf("build: stop sandbox: %w", err)
	}
	layer := filepath.Join(dir, "layer")
	if err := b.backend.Snapshot(ctx, id, layer); err != nil {
		return Build{}, fmt.Errorf("build: snapshot: %w", err)
	}
	bd.Layers = b.layers(key, spec)
	meta, _ := json.MarshalIndent(bd, "", "  ")
	tmp := filepath.Join(dir, "build.json.tmp")
	if err := os.WriteFile(tmp, meta, 0o600); err != nil {
		return Build{}, err
	}
	return bd, os.Rename(tmp, filepath.Join(dir, "build.json"))
}

// Prune removes the Builds of repo beyond the newest Keep, except those
// inUse says a Sandbox still boots from.
func (b *Builder) Prune(repo string, inUse func(key string) bool) error {
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return err
	}
	var builds []Build
	for _, e := range entries {
		if bd, err := b.load(e.Name()); err == nil && bd.Repo == repo {
			builds = append(builds, bd)
		}
	}
	sort.Slice(builds, func(i, j int) bool { return builds[i].CreatedAt.After(builds[j].CreatedAt) })
	var errs []error
	for _, bd := range builds[min(b.keep, len(builds)):] {
		if inUse(bd.Key) {
			continue
		}
		unlock := b.lock(bd.Key)
		b.log.Info("removing an old build", "repo", repo, "key", bd.Key)
		errs = append(errs, os.RemoveAll(filepath.Join(b.dir, bd.Key)))
		unlock()
	}
	return errors.Join(errs...)
}
