package build

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

func TestMain(m *testing.M) {
	if code, ok := oci.RunHelper(os.Args, nil); ok {
		os.Exit(code)
	}
	oci.ReapTests(context.Background())
	os.Exit(m.Run())
}

// builder makes a Builder over a real oci backend on crun and the test
// rootfs.
func builder(t testing.TB, keep int) (*Builder, sandbox.Backend, string) {
	t.Helper()
	return builderOn(t, keep, "crun")
}

// builderOn is builder on runtime: crun, or runsc (gVisor).
func builderOn(t testing.TB, keep int, runtime string) (*Builder, sandbox.Backend, string) {
	t.Helper()
	testenv.RequireRoot(t)
	testenv.RequireCommand(t, "crun")
	base := testkit.Rootfs(t)
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := oci.Options{StateDir: filepath.Join(dir, "oci"), RelayPort: freePort(t), Logger: log}
	if runtime == "runsc" {
		opts.Runtime, opts.RuntimePath = runtime, testkit.Runsc(t)
	}
	be, err := oci.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		all, _ := be.List(context.Background())
		for _, s := range all {
			be.Remove(context.Background(), s.ID)
		}
	})
	b, err := New(be, filepath.Join(dir, "builds"), keep, log)
	if err != nil {
		t.Fatal(err)
	}
	return b, be, base
}

// freePort is a relay port, its egress ports after it, claimed for the
// test (testkit.Ports).
func freePort(t testing.TB) uint16 { return uint16(testkit.Ports(t, 3)) }

func run(t *testing.T, be sandbox.Backend, id string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	p, err := be.Exec(context.Background(), id, sandbox.Cmd{Args: args, Stdout: &out, Stderr: &out,
		Env: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(); err != nil || code != 0 {
		t.Fatalf("%v: exit %d, %v: %s", args, code, err, out.String())
	}
	return out.String()
}

func TestBuildRunsTheBootstrapAndSessionsBootFromIt(t *testing.T) {
	b, be, base := builder(t, 3)
	ctx := context.Background()
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, Env: []string{"AT_BUILD=from-a-variable"},
		Bootstrap: "echo \"built with $AT_BUILD\" > /etc/kndl-built\necho 'export FROM_BASHRC=yes' >> /root/.bashrc\n"}
	var lines []string
	bd, err := b.Ensure(ctx, spec, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("build: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if !slices.Contains(bd.LoginEnv, "FROM_BASHRC=yes") {
		t.Errorf("the login environment lacks what ~/.bashrc exports: %v", bd.LoginEnv)
	}
	for _, kv := range bd.LoginEnv {
		if strings.HasPrefix(kv, "AT_BUILD=") {
			t.Errorf("the login environment captured a Variable: %s", kv)
		}
	}
	if bd.Musl {
		t.Error("a Debian image was found to be musl")
	}
	boot(t, be, "session", bd.Layers)
	if got := run(t, be, "session", "cat", "/etc/kndl-built"); got != "built with from-a-variable\n" {
		t.Errorf("a Session sees %q, want the Bootstrap script's file", got)
	}
	if got := run(t, be, "session", "cat", LoginEnvPath); !strings.Contains(got, "FROM_BASHRC=yes") {
		t.Errorf("%s = %q", LoginEnvPath, got)
	}
	if _, err := os.Stat(filepath.Join(base, "etc", "kndl-built")); err == nil {
		t.Error("the Build wrote into the image's base")
	}

	// The same inputs reuse it, saying so; nothing is built again.
	lines = nil
	again, err := b.Ensure(ctx, spec, func(l string) { lines = append(lines, l) })
	if err != nil || again.Key != bd.Key || len(lines) != 1 || !strings.HasPrefix(lines[0], "using the Build made ") {
		t.Fatalf("second Ensure: key %s (want %s), %v, progress %q", again.Key, bd.Key, err, lines)
	}
}

// TestABuildMadeOnCrunBootsASessionOnGVisor: with RUNNER_BUILD_BACKEND=crun
// a gVisor Runner's Builds are made on crun; the layer they leave is one a
// gVisor Sandbox boots from, its files with the owners the Bootstrap
// script gave them.
func TestABuildMadeOnCrunBootsASessionOnGVisor(t *testing.T) {
	b, _, base := builder(t, 3)
	ctx := context.Background()
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base,
		Bootstrap: "echo built > /etc/kndl-built\nmkdir /home/dev && chown 1000:1000 /home/dev\necho 'export FROM_BASHRC=yes' >> /root/.bashrc\n"}
	bd, err := b.Ensure(ctx, spec, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	gv, err := oci.New(ctx, oci.Options{StateDir: filepath.Join(t.TempDir(), "gvisor"), Runtime: "runsc", RuntimePath: testkit.Runsc(t),
		RelayPort: freePort(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := gv.Create(ctx, sandbox.Spec{ID: "session", Layers: bd.Layers}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gv.Remove(context.Background(), "session") })
	if err := gv.Start(ctx, "session"); err != nil {
		t.Fatal(err)
	}
	if got := run(t, gv, "session", "cat", "/etc/kndl-built", "/proc/version"); !strings.HasPrefix(got, "built\n") || !strings.Contains(got, "gvisor") {
		t.Errorf("the gVisor Session sees %q, want the Bootstrap script's file on gVisor's kernel", got)
	}
	if got := run(t, gv, "session", "stat", "-c", "%u:%g %U", "/home/dev", "/etc/kndl-built"); got != "1000:1000 UNKNOWN\n0:0 root\n" {
		t.Errorf("owners in the gVisor Session: %q, want the Bootstrap's 1000:1000 and root", got)
	}
	if got := run(t, gv, "session", "cat", LoginEnvPath); !strings.Contains(got, "FROM_BASHRC=yes") {
		t.Errorf("%s = %q", LoginEnvPath, got)
	}
}

// TestABuildWithDockerInstallsItWithTheImagesPackageManager: Debian's
// docker.io, with apt from the image's own mirror, before the Bootstrap
// script, which finds it; the Build's layer keeps none of apt's
// downloads (archives, package lists and their caches).
func TestABuildWithDockerInstallsItWithTheImagesPackageManager(t *testing.T) {
	b, be, base := builder(t, 3)
	testkit.RequireDebianMirror(t)
	ctx := context.Background()
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, Docker: true,
		Bootstrap: "dockerd --version > /etc/kndl-dockerd\ndocker-compose version --short >> /etc/kndl-dockerd\n"}
	var lines []string
	bd, err := b.Ensure(ctx, spec, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("build: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if !slices.Contains(lines, "installing Docker (the Environment turns it on)") || !slices.Contains(lines, "installing with apt-get: docker.io docker-compose") {
		t.Errorf("the progress does not say Docker was installed with apt-get:\n%s", strings.Join(lines, "\n"))
	}
	for _, g := range []string{"var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_Packages"} {
		if kept, _ := filepath.Glob(filepath.Join(bd.Layers[0], g)); len(kept) > 0 {
			t.Errorf("the Build's layer keeps %d of apt's %s (%s, ...), want none", len(kept), g, kept[0])
		}
	}
	boot(t, be, "session", bd.Layers)
	if got := run(t, be, "session", "cat", "/etc/kndl-dockerd"); !strings.HasPrefix(got, "Docker version ") || !strings.HasSuffix(got, "\n1.29.2\n") {
		t.Errorf("the Bootstrap script's dockerd --version and docker-compose version printed %q, want Docker's and Debian 12's Compose 1.29.2", got)
	}
}

func TestAFailedBuildEndsWithTheScriptsOutputAndLeavesNothing(t *testing.T) {
	b, be, base := builder(t, 3)
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base,
		Bootstrap: "echo starting\necho 'npm ERR! the real reason' >&2\nexit 7\necho never\n"}
	_, err := b.Ensure(context.Background(), spec, func(string) {})
	if err == nil || !strings.Contains(err.Error(), "npm ERR! the real reason") || !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("err = %v, want the script's exit status and the end of its output", err)
	}
	entries, _ := os.ReadDir(b.dir)
	if len(entries) != 0 {
		t.Errorf("a failed Build left %d entries in the builds directory", len(entries))
	}
	if all, _ := be.List(context.Background()); len(all) != 0 {
		t.Errorf("a failed Build left Sandboxes: %+v", all)
	}
}

func TestPruneKeepsTheNewestAndThoseInUse(t *testing.T) {
	b, _, base := builder(t, 1)
	ctx := context.Background()
	var keys []string
	for i := range 3 {
		bd, err := b.Ensure(ctx, Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, Bootstrap: fmt.Sprintf("echo %d", i)}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, bd.Key)
	}
	if err := b.Prune("r", func(k string) bool { return k == keys[0] }); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		_, err := os.Stat(filepath.Join(b.dir, k))
		kept := err == nil
		if want := i == 0 || i == 2; kept != want {
			t.Errorf("build %d kept = %v, want %v (newest and in-use are kept)", i, kept, want)
		}
	}
}

// BenchmarkColdBuild times a Build from the image's base with a short
// Bootstrap script: boot, probe, script, login shell, snapshot, remove.
func BenchmarkColdBuild(b *testing.B) {
	bl, _, base := builder(b, 100)
	for i := 0; b.Loop(); i++ {
		_, err := bl.Ensure(context.Background(), Spec{Repo: "r", ImageDigest: "sha256:bench", ImageRootfs: base,
			Bootstrap: fmt.Sprintf("echo bench %d > /etc/bench", i)}, func(string) {})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildInstallingAPackage times a Build whose Bootstrap script
// installs one package with apt-get from the Debian mirror, on crun and on
// gVisor, and each step's share: the Bootstrap script (apt-get update and
// install), and what follows it (the login shell, saving its environment,
// stop and snapshot). Medians, in seconds. It needs the mirror.
//
//	CGO_ENABLED=0 go test -run '^$' -bench BuildInstallingAPackage -benchtime 3x ./internal/build/
func BenchmarkBuildInstallingAPackage(b *testing.B) {
	for _, runtime := range []string{"crun", "runsc"} {
		b.Run(runtime, func(b *testing.B) {
			bl, _, base := builderOn(b, 100, runtime)
			var script, after, whole []time.Duration
			for i := 0; b.Loop(); i++ {
				var marks []time.Time
				start := time.Now()
				_, err := bl.Ensure(context.Background(), Spec{Repo: "r", ImageDigest: "sha256:bench", ImageRootfs: base,
					Bootstrap: fmt.Sprintf("apt-get update -q\napt-get install -y -q --no-install-recommends jq\nrm -rf /var/lib/apt/lists/* # %d", i)},
					func(l string) {
						if l == "running the Bootstrap script" || l == "reading the login environment" {
							marks = append(marks, time.Now())
						}
					})
				if err != nil {
					b.Fatal(err)
				}
				if len(marks) != 2 {
					b.Fatalf("the Build's steps said %d of the two lines looked for", len(marks))
				}
				end := time.Now()
				script, after, whole = append(script, marks[1].Sub(marks[0])), append(after, end.Sub(marks[1])), append(whole, end.Sub(start))
			}
			b.ReportMetric(median(script).Seconds(), "bootstrap-s")
			b.ReportMetric(median(after).Seconds(), "login+snapshot-s")
			b.ReportMetric(median(whole).Seconds(), "median-s")
		})
	}
}

func median(xs []time.Duration) time.Duration {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// TestABuildInstallsFeaturesInOrderWithTheirOptions: a Build pulls each
// Feature by digest and runs its install.sh as root, in the order given,
// before the Bootstrap script, its options in its environment; what it
// installed is in a Session's Sandbox, its unpacked folder is not, and
// the Features are part of the Build's key. A Feature's containerEnv is
// set from its install.sh on: the later Features', the Bootstrap's and the
// login environment a Session starts from.
func TestABuildInstallsFeaturesInOrderWithTheirOptions(t *testing.T) {
	b, be, base := builder(t, 3)
	ctx := context.Background()
	pinned, fetch := features(t)
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, ImageEnv: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Features: []Feature{
			{Ref: pinned("f/base:1", `{"id": "base", "containerEnv": {"BASE_HOME": "/opt/base", "BASE_SAYS": "${GREETING:-no option} at ${BASE_HOME}"}}`,
				"#!/bin/sh\nset -e\necho \"base $GREETING $_REMOTE_USER $(id -u) $BASE_HOME\" >> /etc/kndl-features\n"), Env: []string{"GREETING=hi there"}},
			{Ref: pinned("f/tool:1", `{"id": "tool", "containerEnv": {"PATH": "/opt/tool/bin:${PATH}"}}`,
				"#!/bin/sh\nset -e\ngrep -q base /etc/kndl-features\necho \"tool $MODE $BASE_SAYS\" >> /etc/kndl-features\nmkdir -p /opt/tool/bin\nprintf '#!/bin/sh\\necho tool ran\\n' > /opt/tool/bin/kndl-tool\nchmod +x /opt/tool/bin/kndl-tool\n"), Env: []string{"MODE=fast"}},
		},
		FetchFeature: fetch,
		Bootstrap:    "echo \"bootstrap $BASE_HOME $(kndl-tool)\" >> /etc/kndl-features\n"}
	var lines []string
	bd, err := b.Ensure(ctx, spec, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("build: %v\n%s", err, strings.Join(lines, "\n"))
	}
	boot(t, be, "session", bd.Layers)
	if got, want := run(t, be, "session", "cat", "/etc/kndl-features"), "base hi there root 0 /opt/base\ntool fast no option at /opt/base\nbootstrap /opt/base tool ran\n"; got != want {
		t.Errorf("a Session sees %q, want %q: each Feature's install.sh with its options and the containerEnv so far, in order, then the Bootstrap's", got, want)
	}
	if got := run(t, be, "session", "/opt/tool/bin/kndl-tool"); got != "tool ran\n" {
		t.Errorf("the Feature's tool: %q", got)
	}
	for _, want := range []string{"BASE_HOME=/opt/base", "BASE_SAYS=no option at /opt/base"} {
		if !slices.Contains(bd.LoginEnv, want) || !slices.Contains(bd.ImageEnv, want) {
			t.Errorf("the login environment %q and the one it starts from %q: want %s in both", bd.LoginEnv, bd.ImageEnv, want)
		}
	}
	if want := "PATH=/opt/tool/bin:/usr/sbin:/usr/bin:/sbin:/bin"; !slices.Contains(bd.ImageEnv, want) {
		t.Errorf("the environment the login shell starts from: %q, want %s", bd.ImageEnv, want)
	}
	if want := "PATH=/opt/tool/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"; !slices.Contains(bd.LoginEnv, want) {
		t.Errorf("the login environment %q, want %s: the Feature's entry kept where /etc/profile sets PATH anew", bd.LoginEnv, want)
	}
	if got := run(t, be, "session", "sh", "-c", "ls -d "+featureDir+" 2>/dev/null; true"); got != "" {
		t.Errorf("the Feature's folder is left in the Build: %q", got)
	}
	if without := (Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, Bootstrap: spec.Bootstrap}); without.Key() == spec.Key() {
		t.Error("a Build's key does not change with its Features")
	}
}

// TestABuildForAUserChecksTheImageHasItAndProbesItsLogin: a Feature gets
// the Environment's user as _REMOTE_USER (and may make it, as common-utils
// does), the Build then finds it in /etc/passwd and probes the login
// environment as it; a user the image lacks fails the Build naming the
// property.
func TestABuildForAUserChecksTheImageHasItAndProbesItsLogin(t *testing.T) {
	b, be, base := builder(t, 3)
	ctx := context.Background()
	pinned, fetch := features(t)
	ref := pinned("f/user:1", `{"id": "user"}`,
		"#!/bin/sh\nset -e\nuseradd -m -u 1234 \"$_REMOTE_USER\"\necho \"$_REMOTE_USER $_REMOTE_USER_HOME $DC_SAYS\" > /etc/kndl-user\n")
	spec := Spec{Repo: "r", ImageDigest: "sha256:test", ImageRootfs: base, ImageEnv: []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
		Features: []Feature{{Ref: ref}}, Env: []string{"DC_SAYS=set all along"}, User: "dev", FetchFeature: fetch,
		Bootstrap: "cat /etc/kndl-user > /etc/kndl-bootstrap\n"}
	var lines []string
	bd, err := b.Ensure(ctx, spec, func(l string) { lines = append(lines, l) })
	if err != nil {
		t.Fatalf("build: %v\n%s", err, strings.Join(lines, "\n"))
	}
	if want := (User{Name: "dev", UID: 1234, GID: 1234, Home: "/home/dev"}); bd.User == nil || *bd.User != want {
		t.Errorf("the Build's user %+v, want %+v", bd.User, want)
	}
	for _, want := range []string{"HOME=/home/dev", "USER=dev"} {
		if !slices.Contains(bd.LoginEnv, want) {
			t.Errorf("the login environment %q: want %s, the user's login", bd.LoginEnv, want)
		}
	}
	boot(t, be, "session", bd.Layers)
	if got, want := run(t, be, "session", "cat", "/etc/kndl-bootstrap"), "dev /home/dev set all along\n"; got != want {
		t.Errorf("the Feature wrote %q, want %q: _REMOTE_USER, its home and the environment at build, and the Bootstrap after it", got, want)
	}
	if without := spec; func() bool { without.User = ""; return without.Key() == spec.Key() }() {
		t.Error("a Build's key does not change with its user")
	}

	spec.User, spec.Features, spec.Bootstrap = "ghost", nil, "true\n"
	_, err = b.Ensure(ctx, spec, func(string) {})
	if want := `remoteUser, containerUser: the image has no user "ghost" in /etc/passwd`; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("a Build for a user the image lacks: %v, want invalid, saying %q", err, want)
	}
}

// features pushes Features to the test registry: pinned pushes one and
// names it by digest, and fetch pulls one's layer as a Build does.
func features(t *testing.T) (pinned func(repo, meta, install string) string, fetch func(context.Context, string) ([]byte, error)) {
	host := testkit.Registry(t)
	opts := ociimage.Options{Transport: (&outbound.Dialer{Allow: outbound.AllowLoopback}).Transport()}
	pinned = func(repo, meta, install string) string {
		ref := testkit.PushFeature(t, host, repo, meta, install)
		digest, _, err := ociimage.Artifact(context.Background(), ref, protocol.MaxFeatureLayer, opts)
		if err != nil {
			t.Fatal(err)
		}
		return host + "/" + strings.Split(repo, ":")[0] + "@" + digest
	}
	fetch = func(ctx context.Context, ref string) ([]byte, error) {
		_, layer, err := ociimage.Artifact(ctx, ref, protocol.MaxFeatureLayer, opts)
		return layer, err
	}
	return pinned, fetch
}

// boot creates and starts a Sandbox id on layers, a Session's of a Build.
func boot(t *testing.T, be sandbox.Backend, id string, layers []string) {
	t.Helper()
	if err := be.Create(context.Background(), sandbox.Spec{ID: id, Layers: layers}); err != nil {
		t.Fatal(err)
	}
	if err := be.Start(context.Background(), id); err != nil {
		t.Fatal(err)
	}
}
