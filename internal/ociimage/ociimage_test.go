package ociimage_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/testkit"
)

func platformIndex(t testing.TB, imgs map[string]v1.Image) v1.ImageIndex {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, arch := range slices.Sorted(maps.Keys(imgs)) {
		adds = append(adds, mutate.IndexAddendum{
			Add:        imgs[arch],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}},
		})
	}
	return mutate.AppendManifests(empty.Index, adds...)
}

func TestPullPicksLinuxAmd64FromAnIndex(t *testing.T) {
	reg := newRegistry(t)
	amd64 := image(t, []entry{file("arch", "amd64")})
	ref := reg.host + "/multi:latest"
	index := platformIndex(t, map[string]v1.Image{
		"arm64": image(t, []entry{file("arch", "arm64")}),
		"amd64": amd64,
	})
	if err := remote.WriteIndex(mustRef(t, ref), index); err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: loopback})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd64.Digest()
	if img.Digest != want.String() {
		t.Errorf("got digest %s, want the amd64 image's %s", img.Digest, want)
	}
	if b, err := os.ReadFile(filepath.Join(img.Rootfs, "arch")); string(b) != "amd64" {
		t.Errorf("got /arch %q (%v), want amd64", b, err)
	}
	wantConfig := ociimage.Config{
		Env:        []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		WorkingDir: "/srv",
		User:       "1000:1000",
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
	}
	if !equalConfig(img.Config, wantConfig) {
		t.Errorf("got config %+v, want %+v", img.Config, wantConfig)
	}
}

func equalConfig(a, b ociimage.Config) bool {
	return slices.Equal(a.Env, b.Env) && a.WorkingDir == b.WorkingDir && a.User == b.User &&
		slices.Equal(a.Entrypoint, b.Entrypoint) && slices.Equal(a.Cmd, b.Cmd)
}

func TestPullAgainDownloadsNothing(t *testing.T) {
	reg := newRegistry(t)
	ref := reg.push(t, "again:v1", image(t, []entry{file("a", "a")}, []entry{file("b", "b")}))
	dir := t.TempDir()
	ctx := context.Background()
	first, err := ociimage.Pull(ctx, ref, dir, ociimage.Options{Transport: loopback})
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.blobGets.Load(); got != 3 {
		t.Errorf("first pull: got %d blob downloads, want 3 (config and two layers)", got)
	}

	reg.blobGets.Store(0)
	reg.manifests.Store(0)
	second, err := ociimage.Pull(ctx, ref, dir, ociimage.Options{Transport: loopback})
	if err != nil {
		t.Fatal(err)
	}
	if second.Digest != first.Digest || second.Rootfs != first.Rootfs || !equalConfig(second.Config, first.Config) {
		t.Errorf("got %+v, want %+v", second, first)
	}
	if b, m := reg.blobGets.Load(), reg.manifests.Load(); b != 0 || m != 1 {
		t.Errorf("pull by tag again: got %d blob and %d manifest requests, want 0 and 1", b, m)
	}

	reg.manifests.Store(0)
	byDigest := strings.Split(ref, ":v1")[0] + "@" + first.Digest
	if _, err := ociimage.Pull(ctx, byDigest, dir, ociimage.Options{Transport: loopback}); err != nil {
		t.Fatal(err)
	}
	if b, m := reg.blobGets.Load(), reg.manifests.Load(); b != 0 || m != 0 {
		t.Errorf("pull by digest again: got %d blob and %d manifest requests, want none", b, m)
	}
}

func TestPullConcurrentlyDownloadsOnce(t *testing.T) {
	reg := newRegistry(t)
	ref := reg.push(t, "conc:v1", image(t, []entry{file("a", "a")}, []entry{file("b", "b")}))
	dir := t.TempDir()
	var wg sync.WaitGroup
	imgs := make([]ociimage.Image, 4)
	errs := make([]error, 4)
	for i := range imgs {
		wg.Go(func() {
			imgs[i], errs[i] = ociimage.Pull(context.Background(), ref, dir, ociimage.Options{Transport: loopback})
		})
	}
	wg.Wait()
	for i := range imgs {
		if errs[i] != nil || imgs[i].Digest != imgs[0].Digest {
			t.Errorf("pull %d: got %s, %v; want %s", i, imgs[i].Digest, errs[i], imgs[0].Digest)
		}
	}
	if got := reg.blobGets.Load(); got != 3 {
		t.Errorf("got %d blob downloads, want 3: one pull's worth", got)
	}
	if got := names(t, dir); len(got) != 2 || !strings.HasSuffix(got[1], ".lock") {
		t.Errorf("got %v in the images directory, want the image and its lock", got)
	}
}

func TestPullErrors(t *testing.T) {
	reg := newRegistry(t)
	reg.push(t, "there:v1", image(t, []entry{file("a", "a")}))
	armOnly := reg.host + "/armonly:v1"
	if err := remote.WriteIndex(mustRef(t, armOnly), platformIndex(t, map[string]v1.Image{
		"arm64": image(t, []entry{file("a", "a")}),
		"s390x": image(t, []entry{file("b", "b")}),
	})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		ref       string
		wantClass error
		wantText  string
	}{
		{reg.host + "/there:v2", errdefs.ErrNotFound, "check the image name and tag"},
		{reg.host + "/nothere:v1", errdefs.ErrNotFound, "check the image name and tag"},
		{armOnly, errdefs.ErrNotFound, "no linux/amd64 variant (it has linux/arm64, linux/s390x)"},
		{"Not A Ref", errdefs.ErrInvalid, "want a reference such as"},
		{"127.0.0.1:1/nothing:v1", errdefs.ErrUnavailable, "check that the registry is reachable"},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			dir := t.TempDir()
			_, err := ociimage.Pull(context.Background(), tt.ref, dir, ociimage.Options{Transport: loopback})
			t.Log(err)
			if !errors.Is(err, tt.wantClass) || !strings.Contains(err.Error(), tt.wantText) ||
				!strings.HasPrefix(err.Error(), "pull "+tt.ref+": ") {
				t.Errorf("got %v, want %v naming %s with %q", err, tt.wantClass, tt.ref, tt.wantText)
			}
			if got := names(t, dir); len(got) != 0 {
				t.Errorf("a failed pull left %v", got)
			}
		})
	}
}

// TestPullTestImage pulls the Debian test image through the real client,
// from the in-process registry, and finds what Sandboxes need.
func TestPullTestImage(t *testing.T) {
	ref := testkit.ImageRegistry(t)
	var reports []ociimage.Progress
	start := time.Now()
	img, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: loopback,
		Progress: func(p ociimage.Progress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("%s (Pull returned in %v)", reports[len(reports)-1], took)
	for _, p := range []string{"usr/bin/tmux", "usr/bin/git", "usr/bin/bash", "etc/ssl/certs"} {
		if _, err := os.Stat(filepath.Join(img.Rootfs, p)); err != nil {
			t.Errorf("pulled test image lacks %s: %v", p, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(img.Rootfs, "usr/bin/su")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("usr/bin/su: got %v (%v), want setuid", fi.Mode(), err)
	}
	if !slices.Equal(img.Config.Cmd, []string{"bash"}) || len(img.Config.Env) != 1 {
		t.Errorf("got config %+v, want the test image's PATH and bash", img.Config)
	}
	last := reports[len(reports)-1]
	if last.Done != last.Total || last.Total == 0 || last.Layers != 1 || last.Took <= 0 || last.Took > took {
		t.Errorf("last progress report: got %+v, want all of one layer done and the time it took", last)
	}
	if got := last.String(); !strings.HasPrefix(got, "pulled "+ref+": ") || !strings.Contains(got, " MB, unpacked in ") {
		t.Errorf("last progress line: got %q, want the image pulled, its size and the time it took", got)
	}
	if max := int(took/time.Second) + 2; len(reports) > max {
		t.Errorf("got %d progress reports in %v, want at most %d", len(reports), took, max)
	}
}

// BenchmarkPull pulls the test image into a fresh directory (cold) and into
// one that has it already (warm: one manifest request). A cold pull also
// reports the CPU time it took (cpu-ms/op, user and system, the in-process
// registry's too): on a shared host that is steadier than the wall clock.
func BenchmarkPull(b *testing.B) {
	ref := testkit.ImageRegistry(b)
	ctx := context.Background()
	b.Run("cold", func(b *testing.B) {
		var cpu time.Duration
		for b.Loop() {
			dir := filepath.Join(b.TempDir(), "images")
			start := cpuTime()
			if _, err := ociimage.Pull(ctx, ref, dir, ociimage.Options{Transport: loopback}); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - start
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	})
	b.Run("warm", func(b *testing.B) {
		dir := b.TempDir()
		if _, err := ociimage.Pull(ctx, ref, dir, ociimage.Options{Transport: loopback}); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := ociimage.Pull(ctx, ref, dir, ociimage.Options{Transport: loopback}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestAPullUsesNoneOfTheHostsRegistryCredentialsUnlessGivenThem: root's
// Docker login for a registry does not reach it from a Pull without a
// Keychain, which fails as unauthorized; given the host's keychain (the
// Runner's RUNNER_REGISTRY_AUTH=host), the same Pull logs in and succeeds.
func TestAPullUsesNoneOfTheHostsRegistryCredentialsUnlessGivenThem(t *testing.T) {
	reg := newRegistry(t)
	ref := reg.push(t, "private:v1", image(t, []entry{file("a", "a")}))
	const login = "root:host-registry-s3cret"
	var sent atomic.Value
	locked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok {
			sent.Store(user + ":" + pass)
		}
		if !ok || user+":"+pass != login {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "login first", http.StatusUnauthorized)
			return
		}
		(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: "http", Host: reg.host}) }}).ServeHTTP(w, r)
	}))
	t.Cleanup(locked.Close)
	host := strings.TrimPrefix(locked.URL, "http://")
	docker := t.TempDir()
	auths := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, base64.StdEncoding.EncodeToString([]byte(login)))
	if err := os.WriteFile(filepath.Join(docker, "config.json"), []byte(auths), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DOCKER_CONFIG", docker)
	ref = host + strings.TrimPrefix(ref, reg.host)

	_, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: loopback})
	if !errors.Is(err, errdefs.ErrUnauthorized) || !strings.Contains(err.Error(), "RUNNER_REGISTRY_AUTH=host") {
		t.Errorf("a Pull with no keychain: got %v, want unauthorized naming RUNNER_REGISTRY_AUTH=host", err)
	}
	if s, _ := sent.Load().(string); s != "" {
		t.Fatalf("a Pull with no keychain sent the host's login %q", s)
	}
	if _, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: loopback, Keychain: authn.DefaultKeychain}); err != nil {
		t.Fatalf("a Pull with the host's keychain: %v", err)
	}
}

// TestTheLaterLayersDownloadWhileTheFirstIsUnpacked: the registry holds
// back the end of the first layer until the last has been asked for, as a
// slow download would; a pull that fetched layers one after another would
// wait the whole hold. Layers still apply in order: the last one's
// whiteout removes the first one's file.
func TestTheLaterLayersDownloadWhileTheFirstIsUnpacked(t *testing.T) {
	const hold = 10 * time.Second
	img := image(t,
		[]entry{file("a", "a"), file("gone", "g")},
		[]entry{file("b", "b")},
		[]entry{file("c", "c"), file(".wh.gone", "")},
	)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := layers[0].Digest()
	last, _ := layers[2].Digest()
	lastAsked := make(chan struct{})
	var once sync.Once
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.Method != http.MethodGet:
		case strings.HasSuffix(req.URL.Path, "/blobs/"+last.String()):
			once.Do(func() { close(lastAsked) })
		case strings.HasSuffix(req.URL.Path, "/blobs/"+first.String()):
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			maps.Copy(w.Header(), rec.Header())
			w.WriteHeader(rec.Code)
			body := rec.Body.Bytes()
			w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			select {
			case <-lastAsked:
			case <-time.After(hold):
			}
			w.Write(body[len(body)/2:])
			return
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/layered:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pulled, err := ociimage.Pull(context.Background(), ref, t.TempDir(), ociimage.Options{Transport: loopback})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= hold {
		t.Errorf("the pull took %v: the last layer was asked for only after the first was whole", took)
	}
	if got, want := names(t, pulled.Rootfs), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("got %v in the root filesystem, want %v", got, want)
	}
}
