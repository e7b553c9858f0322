package ociimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/testenv"
)

var mtime = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func hdr(typ byte, name string, mode int64) tar.Header {
	return tar.Header{Typeflag: typ, Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX}
}

type entry struct {
	tar.Header
	body string
}

func dir(name string) entry { return entry{Header: hdr(tar.TypeDir, name, 0o755)} }
func file(name, body string) entry {
	return entry{Header: hdr(tar.TypeReg, name, 0o644), body: body}
}
func sym(name, target string) entry {
	e := entry{Header: hdr(tar.TypeSymlink, name, 0o777)}
	e.Linkname = target
	return e
}
func hard(name, target string) entry {
	e := entry{Header: hdr(tar.TypeLink, name, 0o644)}
	e.Linkname = target
	return e
}
func with(e entry, mode int64, uid, gid int) entry {
	e.Mode, e.Uid, e.Gid = mode, uid, gid
	return e
}

func layer(t testing.TB, entries []entry) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := e.Header
		h.Size = int64(len(e.body))
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testRegistry is go-containerregistry's in-process registry on loopback,
// counting the blobs it serves.
type testRegistry struct {
	host      string
	blobGets  atomic.Int64
	manifests atomic.Int64
}

// loopback reaches the tests' registries, on loopback, as kndl dev's Runner
// does: a Pull's own default refuses them.
var loopback = (&outbound.Dialer{Allow: outbound.AllowLoopback}).Transport()

func newRegistry(t testing.TB) *testRegistry {
	r := &testRegistry{}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobGets.Add(1)
		}
		if strings.Contains(req.URL.Path, "/manifests/") {
			r.manifests.Add(1)
		}
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	return r
}

func (r *testRegistry) push(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	ref := r.host + "/" + repo
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return ref
}

func mustRef(t testing.TB, s string) name.Reference {
	r, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func image(t testing.TB, layers ...[]entry) v1.Image {
	t.Helper()
	img := empty.Image
	for _, es := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, layer(t, es)); err != nil {
			t.Fatal(err)
		}
	}
	img, err := mutate.Config(img, v1.Config{
		Env:        []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"},
		WorkingDir: "/srv",
		User:       "1000:1000",
		Entrypoint: []string{"/bin/sh", "-c"},
		Cmd:        []string{"echo hi"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// tree lists every path under root with its type, mode, owner, and its
// target or contents.
func tree(t testing.TB, root string) []string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		perm := st.Mode & 0o7777
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, fmt.Sprintf("%s l %d:%d -> %s", rel, st.Uid, st.Gid, target))
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("%s d %04o %d:%d", rel, perm, st.Uid, st.Gid))
		case fi.Mode()&fs.ModeNamedPipe != 0:
			lines = append(lines, fmt.Sprintf("%s p %04o %d:%d", rel, perm, st.Uid, st.Gid))
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			line := fmt.Sprintf("%s f %04o %d:%d %q", rel, perm, st.Uid, st.Gid, b)
			if st.Nlink > 1 {
				line += fmt.Sprintf(" links=%d", st.Nlink)
			}
			lines = append(lines, line)
		default:
			lines = append(lines, fmt.Sprintf("%s ? %v", rel, fi.Mode()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestPullUnpacksLayers(t *testing.T) {
	testenv.RequireRoot(t) // owners, setuid and xattrs are kept only as root
	fifo := entry{Header: hdr(tar.TypeFifo, "run/fifo", 0o620)}
	null := entry{Header: hdr(tar.TypeChar, "dev/null", 0o666)}
	null.Devmajor, null.Devminor = 1, 3
	capped := file("usr/bin/ping", "ping")
	capped.PAXRecords = map[string]string{
		"SCHILY.xattr.security.capability":    "\x01\x00\x00\x02\x00\x20\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
		"SCHILY.xattr.trusted.overlay.opaque": "y",
	}

	tests := []struct {
		name    string
		layers  [][]entry
		want    []string
		check   func(t *testing.T, rootfs string)
		wantErr string
	}{{
		name: "files, modes, owners, links",
		layers: [][]entry{{
			with(dir("./"), 0o755, 0, 0),
			dir("etc/"),
			file("etc/passwd", "root:x:0:0"),
			with(file("usr/bin/su", "su"), 0o4755, 0, 0),
			with(file("home/u/.profile", "PATH=x"), 0o600, 1000, 1001),
			sym("bin", "usr/bin"),
			hard("usr/bin/su2", "usr/bin/su"),
			with(dir("tmp/"), 0o1777, 0, 0),
			with(dir("srv/"), 0o2750, 0, 50),
			fifo, null, capped,
		}},
		want: []string{
			". d 0755 0:0",
			"bin l 0:0 -> usr/bin",
			"etc d 0755 0:0",
			`etc/passwd f 0644 0:0 "root:x:0:0"`,
			"home d 0755 0:0",
			"home/u d 0755 0:0",
			`home/u/.profile f 0600 1000:1001 "PATH=x"`,
			"run d 0755 0:0",
			"run/fifo p 0620 0:0",
			"srv d 2750 0:50",
			"tmp d 1777 0:0",
			"usr d 0755 0:0",
			"usr/bin d 0755 0:0",
			`usr/bin/ping f 0644 0:0 "ping"`,
			`usr/bin/su f 4755 0:0 "su" links=2`,
			`usr/bin/su2 f 4755 0:0 "su" links=2`,
		},
		check: func(t *testing.T, rootfs string) {
			ping := filepath.Join(rootfs, "usr/bin/ping")
			if _, err := xattr(ping, "security.capability"); err != nil {
				t.Errorf("file capability not kept: %v", err)
			}
			if v, err := xattr(ping, "trusted.overlay.opaque"); err == nil {
				t.Errorf("got trusted.overlay.opaque=%q, want it dropped", v)
			}
			for _, p := range []string{"etc/passwd", "etc", "bin"} {
				fi, err := os.Lstat(filepath.Join(rootfs, p))
				if err != nil || !fi.ModTime().Equal(mtime) {
					t.Errorf("%s: got mtime %v (%v), want %v", p, fi.ModTime(), err, mtime)
				}
			}
		},
	}, {
		name: "a whiteout removes a file below",
		layers: [][]entry{
			{file("a/x", "x"), file("a/y", "y")},
			{file("a/.wh.x", "")},
		},
		want: []string{". d 0755 0:0", "a d 0755 0:0", `a/y f 0644 0:0 "y"`},
	}, {
		name: "a whiteout removes a directory below",
		layers: [][]entry{
			{file("d/x/y", "y"), file("e", "e")},
			{file(".wh.d", "")},
		},
		want: []string{". d 0755 0:0", `e f 0644 0:0 "e"`},
	}, {
		name: "a whiteout spares its own layer",
		layers: [][]entry{
			{file("a/x", "old")},
			{file("a/x", "new"), file("a/.wh.x", "")},
		},
		want: []string{". d 0755 0:0", "a d 0755 0:0", `a/x f 0644 0:0 "new"`},
	}, {
		name: "an opaque directory hides the layers below, not its own",
		layers: [][]entry{
			{file("d/old", "o"), file("d/sub/old2", "o"), file("d/sub/keep", "old")},
			{file("d/new", "n"), file("d/.wh..wh..opq", ""), file("d/sub/keep", "new")},
		},
		want: []string{
			". d 0755 0:0", "d d 0755 0:0", `d/new f 0644 0:0 "n"`,
			"d/sub d 0755 0:0", `d/sub/keep f 0644 0:0 "new"`,
		},
	}, {
		name: "a file replaced by a directory",
		layers: [][]entry{
			{file("p", "file")},
			{dir("p/"), file("p/q", "q")},
		},
		want: []string{". d 0755 0:0", "p d 0755 0:0", `p/q f 0644 0:0 "q"`},
	}, {
		name: "a directory replaced by a file",
		layers: [][]entry{
			{file("q/r", "r")},
			{file("q", "file")},
		},
		want: []string{". d 0755 0:0", `q f 0644 0:0 "file"`},
	}, {
		name: "a file replaced by a symlink is not written through",
		layers: [][]entry{
			{file("etc/shadow", "secret"), file("x", "x")},
			{sym("x", "/etc/shadow")},
			{file("x", "overwritten")},
		},
		want: []string{". d 0755 0:0", "etc d 0755 0:0", `etc/shadow f 0644 0:0 "secret"`, `x f 0644 0:0 "overwritten"`},
	}, {
		// Absolute symlinks point into /proc, and relative ones climb out
		// just as far as the test's temporary directory, so that a broken
		// resolver fails or writes where the test looks, never on the host.
		name: "an absolute symlinked parent resolves inside the root",
		layers: [][]entry{
			{dir("proc/run/"), sym("var/run", "/proc/run")},
			{file("var/run/pid", "1")},
		},
		want: []string{
			". d 0755 0:0", "proc d 0755 0:0", "proc/run d 0755 0:0", `proc/run/pid f 0644 0:0 "1"`,
			"var d 0755 0:0", "var/run l 0:0 -> /proc/run",
		},
	}, {
		name: "a symlinked parent climbing out stops at the root",
		layers: [][]entry{
			{sym("up", "../../..")},
			{file("up/pwned", "x")},
		},
		want: []string{". d 0755 0:0", `pwned f 0644 0:0 "x"`, "up l 0:0 -> ../../.."},
	}, {
		name: "an absolute symlink made in the same layer stays inside",
		layers: [][]entry{
			{dir("e/"), sym("e", "/proc"), file("e/pwned", "x"), file("e/.wh.pwned", "")},
		},
		want: []string{". d 0755 0:0", "e l 0:0 -> /proc", "proc d 0755 0:0", `proc/pwned f 0644 0:0 "x"`},
	}, {
		name: "a whiteout through a symlink escaping the root stays inside",
		layers: [][]entry{
			{file("keep", "k"), sym("esc", "../..")},
			{file("esc/.wh.keep", "")},
		},
		want: []string{". d 0755 0:0", "esc l 0:0 -> ../.."},
	}, {
		name: "a hard link through a symlinked parent stays inside",
		layers: [][]entry{
			{file("etc/passwd", "image"), sym("s", "/etc"), hard("h", "s/passwd")},
		},
		want: []string{
			". d 0755 0:0", "etc d 0755 0:0", `etc/passwd f 0644 0:0 "image" links=2`,
			`h f 0644 0:0 "image" links=2`, "s l 0:0 -> /etc",
		},
	}, {
		name: "a directory replaced by a symlink later in its layer is not written through",
		layers: [][]entry{
			{dir("d/"), file("d/a", "a"), sym("d", "/proc"), file("d/b", "b")},
		},
		want: []string{". d 0755 0:0", "d l 0:0 -> /proc", "proc d 0755 0:0", `proc/b f 0644 0:0 "b"`},
	}, {
		name: "a directory whited out and made a symlink in the next layer is not written through",
		layers: [][]entry{
			{dir("d/"), file("d/a", "a")},
			{file(".wh.d", ""), sym("d", "/proc"), file("d/b", "b")},
		},
		want: []string{". d 0755 0:0", "d l 0:0 -> /proc", "proc d 0755 0:0", `proc/b f 0644 0:0 "b"`},
	}, {
		name: "an entry given twice in a layer is the second",
		layers: [][]entry{
			{file("x", "1"), file("x", "2"), dir("y/"), with(dir("y/"), 0o700, 0, 0), file("y/z", "z")},
		},
		want: []string{". d 0755 0:0", `x f 0644 0:0 "2"`, "y d 0700 0:0", `y/z f 0644 0:0 "z"`},
	}, {
		name:    "a path climbing out",
		layers:  [][]entry{{file("a", "a"), file("../evil", "x")}},
		wantErr: `leaves the root`,
	}, {
		name:    "a path climbing out from inside",
		layers:  [][]entry{{file("a/../../evil", "x")}},
		wantErr: `leaves the root`,
	}, {
		name:    "an absolute path",
		layers:  [][]entry{{file("/etc/evil", "x")}},
		wantErr: `absolute path "/etc/evil"`,
	}, {
		name:    "a hard link climbing out",
		layers:  [][]entry{{hard("h", "../../../../etc/passwd")}},
		wantErr: `leaves the root`,
	}, {
		name:    "an absolute hard link",
		layers:  [][]entry{{hard("h", "/etc/passwd")}},
		wantErr: `absolute path`,
	}, {
		name:    "a hard link through a symlink to a host file",
		layers:  [][]entry{{sym("s", "/etc"), hard("h", "s/hostname")}},
		wantErr: "not a file in the image",
	}, {
		name:    "a whiteout climbing out",
		layers:  [][]entry{{file(".wh...", "")}},
		wantErr: "bad whiteout",
	}, {
		name:    "a symlink loop",
		layers:  [][]entry{{sym("a", "b"), sym("b", "a"), file("a/x", "x")}},
		wantErr: "too many levels of symbolic links",
	}}
	reg := newRegistry(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := t.TempDir()
			dir := filepath.Join(top, "images")
			ref := reg.push(t, fmt.Sprintf("case%d:latest", i), image(t, tt.layers...))
			img, err := ociimage.Pull(context.Background(), ref, dir, ociimage.Options{Transport: loopback})
			// Nothing ever lands beside the images directory.
			if got := names(t, top); !slices.Equal(got, []string{"images"}) {
				t.Errorf("beside the images directory: got %v, want [images]", got)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errdefs.ErrInvalid) {
					t.Fatalf("got error %v, want ErrInvalid with %q", err, tt.wantErr)
				}
				if !strings.Contains(err.Error(), ref) {
					t.Errorf("error %q does not name %s", err, ref)
				}
				for _, n := range names(t, dir) {
					if !strings.HasSuffix(n, ".lock") {
						t.Errorf("a failed pull left %s behind", n)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tree(t, img.Rootfs); !slices.Equal(got, tt.want) {
				t.Errorf("got tree\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
			}
			if tt.check != nil {
				tt.check(t, img.Rootfs)
			}
		})
	}
}

func names(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

func xattr(path, key string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Lgetxattr(path, key, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestALayerWhoseLastBytesAreNotItsDigestsIsRefused: the registry serves a
// layer whose last byte, past the tar's end, differs from what its digest
// says: in a gzip layer its trailer, in an uncompressed one the padding the
// tar reader never reads. Only reading the blob to its end finds it: the
// pull fails and leaves nothing.
func TestALayerWhoseLastBytesAreNotItsDigestsIsRefused(t *testing.T) {
	entries := []entry{file("a", "a"), file("b", strings.Repeat("b", 1<<20))}
	padded := func(t testing.TB) v1.Layer {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		for _, e := range entries {
			h := e.Header
			h.Size = int64(len(e.body))
			tw.WriteHeader(&h)
			io.WriteString(tw, e.body)
		}
		tw.Close()
		buf.Write(make([]byte, 10240)) // as tar(1) pads to its records
		return static.NewLayer(buf.Bytes(), types.DockerUncompressedLayer)
	}
	for _, tt := range []struct {
		name  string
		layer func(testing.TB) v1.Layer
		want  string
	}{
		{"gzip", func(t testing.TB) v1.Layer { return layer(t, entries) }, "gzip: invalid checksum"},
		{"uncompressed", padded, "error verifying sha256 checksum"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			img, err := mutate.AppendLayers(empty.Image, tt.layer(t))
			if err != nil {
				t.Fatal(err)
			}
			ref := tamperingRegistry(t, img)
			dir := t.TempDir()
			_, err = ociimage.Pull(context.Background(), ref, dir, ociimage.Options{Transport: loopback})
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), "layer 1 of 1") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want the pull of layer 1 refused with %q", err, tt.want)
			}
			for _, n := range names(t, dir) {
				if !strings.HasSuffix(n, ".lock") {
					t.Errorf("a refused pull left %s behind", n)
				}
			}
		})
	}
}

// tamperingRegistry serves img with the last byte of its first layer
// flipped, and returns its reference.
func tamperingRegistry(t testing.TB, img v1.Image) string {
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	digest, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/blobs/"+digest.String()) {
			h.ServeHTTP(w, req)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.Bytes()
		body[len(body)-1] ^= 0xff
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/tampered:v1"
	if err := remote.Write(mustRef(t, ref), img); err != nil {
		t.Fatal(err)
	}
	return ref
}
