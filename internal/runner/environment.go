package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"kndl.dev/kndl/internal/build"
	"kndl.dev/kndl/internal/dockerd"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// A Session's Sandbox comes from its Repo's Environment: its image (the
// Runner's RUNNER_DEFAULT_IMAGE when it names none), its Bootstrap script
// in the Build, its Start script in each new Sandbox, its resources. A Test
// build runs the same steps on a fresh clone and leaves no Sandbox or
// clone behind; the Build it made stays, so a Session of the version the
// draft becomes starts warm.

// buildFor pulls the Environment's image and makes or finds its Build;
// pulled, if not nil, gets the image's unpacked root filesystem as soon as
// it is there, before the Build.
func (r *Runner) buildFor(ctx context.Context, repoURL string, env *protocol.Environment, vars []protocol.Variable, logf func(string, ...any), pulled func(rootfs string)) (build.Build, error) {
	// Refused before the Build, which would install Docker for nothing.
	if why := r.backend.Host().NoDocker; docker(env) && why != "" {
		return build.Build{}, fmt.Errorf("%s: %w", why, sandbox.ErrNotSupported)
	}
	ref := r.cfg.Image
	spec := build.Spec{Repo: repoURL}
	if env != nil {
		if env.Image != "" {
			ref = env.Image
		}
		spec.Bootstrap, spec.Docker = env.Bootstrap, env.Docker
		for _, f := range env.Features {
			spec.Features = append(spec.Features, build.Feature{Ref: f.Ref, Env: f.Env})
		}
		switch {
		case env.User != "" && r.cfg.RootOnly:
			logf("remoteUser, containerUser: the Environment names the user %s, and this Runner runs Claude Code as root (RUNNER_ENVIRONMENT_USER=off)", env.User)
		default:
			spec.User = env.User
		}
	}
	opts := ociimage.Options{Transport: r.cfg.Outbound.Transport(), Progress: func(p ociimage.Progress) { logf("%s", p) }}
	if r.cfg.RegistryAuth == RegistryAuthHost {
		opts.Keychain = authn.DefaultKeychain
	}
	// A Feature comes through the same registry settings as the image.
	spec.FetchFeature = func(ctx context.Context, ref string) ([]byte, error) {
		_, layer, err := ociimage.Artifact(ctx, ref, protocol.MaxFeatureLayer, opts)
		return layer, err
	}
	img, err := ociimage.Pull(ctx, ref, filepath.Join(r.cfg.Home, "images"), opts)
	if err != nil {
		return build.Build{}, err
	}
	spec.ImageDigest, spec.ImageRootfs, spec.ImageEnv = img.Digest, img.Rootfs, img.Config.Env
	if pulled != nil {
		pulled(img.Rootfs)
	}
	spec.Env = buildEnv(env, vars)
	return r.builder.Ensure(ctx, spec, func(line string) { logf("build: %s", line) })
}

// buildEnv is what the Build's Features and Bootstrap script get over the
// image's environment: the Environment's containerEnv, with the Variables
// available at build over it, one value a name.
func buildEnv(env *protocol.Environment, vars []protocol.Variable) []string {
	var out []string
	at := map[string]int{}
	set := func(name, value string) {
		if i, ok := at[name]; ok {
			out[i] = name + "=" + value
			return
		}
		at[name] = len(out)
		out = append(out, name+"="+value)
	}
	if env != nil {
		for _, kv := range env.ContainerEnv {
			name, value, _ := strings.Cut(kv, "=")
			set(name, value)
		}
	}
	for _, v := range vars {
		if v.AtBuild {
			set(v.Name, v.Value)
		}
	}
	return out
}

// runStart runs the Environment's Start script in /workspace of a new
// Sandbox, its output in the log, then probes the login environment there
// again (with no Variable in the probe's environment), since the script
// may have changed what a login shell sets up. It returns the login
// environment Claude Code gets: the Build's when there is no Start script.
func runStart(ctx context.Context, b sandbox.Backend, id string, env *protocol.Environment, bd build.Build, procEnv []string, logf func(string, ...any)) ([]string, error) {
	if env == nil || strings.TrimSpace(env.Start) == "" {
		return bd.LoginEnv, nil
	}
	logf("running the Start script")
	if err := build.RunScript(ctx, b, id, workspaceDir, procEnv, env.Start, func(line string) { logf("start: %s", line) }); err != nil {
		return nil, fmt.Errorf("the Start script failed: %w", err)
	}
	login, err := build.LoginEnv(ctx, b, id, workspaceDir, bd.ImageEnv, bd.User)
	if err != nil {
		return nil, fmt.Errorf("the login shell failed after the Start script: %w", err)
	}
	return login, nil
}

// docker reports whether the Environment turns Docker on.
func docker(env *protocol.Environment) bool { return env != nil && env.Docker }

// withDockerDisk adds the Docker disk to disks when the Environment turns
// Docker on: dockerd's data, kept across sleeps like the others.
func withDockerDisk(env *protocol.Environment, disks []sandbox.Disk) []sandbox.Disk {
	if docker(env) {
		disks = append(disks, sandbox.Disk{Name: dockerd.Disk, Target: dockerd.DataDir})
	}
	return disks
}

// startDocker starts dockerd in a Sandbox just booted, before the Start
// script, which may use it, when the Environment turns Docker on.
func startDocker(ctx context.Context, b sandbox.Backend, id string, env *protocol.Environment, logf func(string, ...any)) error {
	if !docker(env) {
		return nil
	}
	logf("starting dockerd")
	return dockerd.Start(ctx, b, id)
}

// resources are what an Environment asks for each Sandbox.
func resources(env *protocol.Environment) sandbox.Resources {
	if env == nil {
		return sandbox.Resources{}
	}
	return sandbox.Resources{CPUs: env.CPUs, MemoryMiB: env.MemoryMiB}
}

// testBuild runs a Test build: the draft's Build, then its Start script on
// a fresh clone of the Repo, each line of log sent to the Hub as it comes.
func (r *Runner) testBuild(ctx context.Context, req protocol.EnvTest) error {
	if !protocol.ValidSessionID(req.TestID) {
		return fmt.Errorf("test id %q: %w", req.TestID, errdefs.ErrInvalid)
	}
	log := &testLog{r: r, id: req.TestID}
	defer log.flush()
	logf := func(format string, args ...any) { log.line(fmt.Sprintf(format, args...)) }
	env := req.Environment
	bd, err := r.buildFor(ctx, req.RepoURL, &env, req.Variables, logf, nil)
	if err != nil {
		logf("%v", err)
		return err
	}
	dir := filepath.Join(r.cfg.Home, "tests", req.TestID)
	defer os.RemoveAll(dir)
	if err := cloneWorkspace(ctx, &r.cfg.Outbound, req.RepoURL, req.CloneToken, filepath.Join(dir, "workspace"), func(line string) { logf("%s", line) }); err != nil {
		logf("%v", err)
		return err
	}
	id := "t-" + req.TestID
	// Its dependency folders are bound as a Session's are, so the Start
	// script's installs go where they will.
	if err := r.backend.Create(ctx, sandbox.Spec{ID: id, Layers: bd.Layers, Resources: resources(&env), Docker: env.Docker,
		Disks: withDockerDisk(&env, []sandbox.Disk{{Name: depsDisk, Target: depsDir}}),
		Binds: []sandbox.Bind{{Source: filepath.Join(dir, "workspace"), Target: workspaceDir}}}); err != nil {
		return fmt.Errorf("create the Test build's Sandbox: %w", err)
	}
	defer r.backend.Remove(context.WithoutCancel(ctx), id)
	if err := bindDependencies(ctx, r.backend, id, filepath.Join(dir, "workspace"), &env, logf); err != nil {
		logf("%v", err)
		return err
	}
	if err := r.backend.Start(ctx, id); err != nil {
		return fmt.Errorf("start the Test build's Sandbox: %w", err)
	}
	if err := startDocker(ctx, r.backend, id, &env, logf); err != nil {
		logf("%v", err)
		return err
	}
	var vars []string
	for _, v := range req.Variables {
		vars = append(vars, v.Name+"="+v.Value)
	}
	if _, err := runStart(ctx, r.backend, id, &env, bd, append(append([]string(nil), bd.LoginEnv...), vars...), logf); err != nil {
		logf("%v", err)
		return err
	}
	logf("the Test build passed")
	return nil
}

// testLog sends a Test build's lines to the Hub, a batch at most every
// testLogEvery, so a chatty script is not a message a line.
type testLog struct {
	r     *Runner
	id    string
	mu    sync.Mutex
	lines []string
	timer *time.Timer
}

const testLogEvery = 200 * time.Millisecond

func (l *testLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	if l.timer == nil {
		l.timer = time.AfterFunc(testLogEvery, l.flush)
	}
}

func (l *testLog) flush() {
	l.mu.Lock()
	lines := l.lines
	l.lines, l.timer = nil, nil
	l.mu.Unlock()
	if len(lines) > 0 {
		l.r.notify("", protocol.TypeEnvTestLog, protocol.EnvTestLog{TestID: l.id, Lines: lines})
	}
}
