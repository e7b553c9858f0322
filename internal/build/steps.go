package build

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/sandbox"
)

// step runs the commands of one Build in its Sandbox.
type step struct {
	backend  sandbox.Backend
	id       string
	env      []string
	dir      string // where commands run; "/" when empty
	progress func(string)
	// user, if set, is whom the login environment is probed as.
	user *User
}

// passwdScript prints the passwd entry of the user named or numbered $1 as
// name:uid:gid:home, nothing if the image has none. awk, not getent: a
// musl image may have no getent.
const passwdScript = `awk -F: -v u="$1" '$1 == u || $3 == u { print $1 ":" $3 ":" $4 ":" $6; exit }' /etc/passwd`

// lookupUser reads the user named or numbered u from the Sandbox's
// /etc/passwd.
func (s step) lookupUser(ctx context.Context, u string) (User, bool, error) {
	out, err := s.quiet(ctx, "sh", "-c", passwdScript, "passwd", u)
	if err != nil {
		return User{}, false, err
	}
	f := strings.Split(strings.TrimSpace(out), ":")
	if len(f) != 4 {
		return User{}, false, nil
	}
	uid, err1 := strconv.Atoi(f[1])
	gid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return User{}, false, fmt.Errorf("its passwd entry %q has no numeric uid and gid", out)
	}
	return User{Name: f[0], UID: uid, GID: gid, Home: or(f[3], "/")}, true, nil
}

// RunScript runs a script of the Environment's (the Start script) in a
// running Sandbox, in dir, as the Bootstrap script runs: output to progress
// line by line, an error carrying the end of it.
func RunScript(ctx context.Context, b sandbox.Backend, id, dir string, env []string, script string, progress func(string)) error {
	return step{backend: b, id: id, env: env, dir: dir, progress: progress}.script(ctx, env, script)
}

// tailBytes is how much of a failing step's output its error carries.
const tailBytes = 4096

// run runs a command, streaming its output to progress line by line; an
// error carries the end of the output.
func (s step) run(ctx context.Context, env []string, args ...any) error {
	var argv []string
	var stdin io.Reader
	for _, a := range args {
		switch v := a.(type) {
		case string:
			argv = append(argv, v)
		case io.Reader:
			stdin = v
		}
	}
	if env == nil {
		env = s.env
	}
	out := &lineWriter{emit: s.progress}
	p, err := s.backend.Exec(ctx, s.id, sandbox.Cmd{Args: argv, Env: withPath(env), Dir: or(s.dir, "/"), Stdin: stdin, Stdout: out, Stderr: out})
	if err != nil {
		return err
	}
	code, err := p.Wait()
	out.flush()
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("exit status %d; the output ended with:\n%s", code, out.tail.String())
	}
	return nil
}

// quiet runs a command and returns its output.
func (s step) quiet(ctx context.Context, args ...string) (string, error) {
	return sandbox.Output(ctx, s.backend, s.id, sandbox.Cmd{Args: args, Env: withPath(s.env), Dir: "/"})
}

// script runs a script: with its #! line if it has one, else with bash -e
// (every Build has bash by now).
func (s step) script(ctx context.Context, env []string, script string) error {
	if strings.HasPrefix(script, "#!") {
		const path = "/tmp/kndl-script"
		if err := s.run(ctx, nil, "sh", "-c", "cat > "+path+" && chmod 0755 "+path, strings.NewReader(script)); err != nil {
			return err
		}
		defer s.quiet(context.WithoutCancel(ctx), "rm", "-f", path)
		return s.run(ctx, env, path)
	}
	return s.run(ctx, env, "bash", "-e", "-s", strings.NewReader(script))
}

// loginTimeout bounds the login shell probe.
const loginTimeout = 60 * time.Second

const envMarker = "\x00KNDL-LOGIN-ENV\x00"

// LoginEnv probes a running Sandbox's login environment in dir, as a
// Build does: after an Environment's Start script, which may have changed
// what a login shell sets up.
func LoginEnv(ctx context.Context, b sandbox.Backend, id, dir string, imageEnv []string, user *User) ([]string, error) {
	return step{backend: b, id: id, env: imageEnv, dir: dir, user: user}.loginEnv(ctx)
}

// loginEnv runs an interactive login shell, as a terminal would, with no
// Variable in its environment, and returns the environment it ends with.
func (s step) loginEnv(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := sandbox.Cmd{
		Args: []string{"bash", "-lic", `printf '\0KNDL-LOGIN-ENV\0'; env -0`},
		Env:  withPath(s.env), Dir: or(s.dir, "/root"), Stdout: &out, Stderr: &errOut,
	}
	if u := s.user; u != nil {
		// Its own login, in its home unless a folder is named.
		cmd.User, cmd.Env, cmd.Dir = u.Name, append(cmd.Env, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name), or(s.dir, u.Home)
	}
	p, err := s.backend.Exec(ctx, s.id, cmd)
	if err != nil {
		return nil, err
	}
	code, err := p.Wait()
	if ctx.Err() != nil {
		return nil, fmt.Errorf("it took more than %s", loginTimeout)
	}
	if err != nil || code != 0 {
		return nil, fmt.Errorf("exit status %d: %s", code, lastBytes(errOut.String(), tailBytes))
	}
	_, env, ok := strings.Cut(out.String(), envMarker)
	if !ok {
		return nil, fmt.Errorf("it printed no environment: %s", lastBytes(errOut.String(), tailBytes))
	}
	var vars []string
	for _, kv := range strings.Split(env, "\x00") {
		k, v, ok := strings.Cut(kv, "=")
		if k == "PATH" {
			kv = "PATH=" + keepPath(v, lookup(withPath(s.env), "PATH"))
		}
		// The shell's own bookkeeping is not an environment.
		if ok && k != "" && k != "_" && k != "SHLVL" && k != "PWD" && k != "OLDPWD" {
			vars = append(vars, kv)
		}
	}
	return vars, nil
}

// keepPath is the login shell's PATH with the entries of the one it
// started from (the image's, with its Features' containerEnv) that it
// dropped put back, each before the next entry both have, as the Dev
// Container CLI merges them: a login shell's /etc/profile, Debian's
// among them, sets PATH anew.
func keepPath(login, from string) string {
	out := strings.Split(login, ":")
	at := 0
	for _, e := range strings.Split(from, ":") {
		switch i := slices.Index(out, e); {
		case i >= 0:
			at = i + 1
		case e != "":
			out = slices.Insert(out, at, e)
			at++
		}
	}
	return strings.Join(out, ":")
}

// lacks reads the probe's output and names what Claude Code needs that the
// image lacks: bash, git, tmux 3.2+.
func lacks(probe string) []string {
	var missing []string
	if !strings.Contains(probe, "/bash") {
		missing = append(missing, "bash")
	}
	if !strings.Contains(probe, "/git") {
		missing = append(missing, "git")
	}
	if !tmuxNewEnough(probe) {
		missing = append(missing, "tmux")
	}
	return missing
}

var tmuxVersionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`tmux (?:next-)?(\d+)\.(\d+)`) })

func tmuxNewEnough(s string) bool {
	m := tmuxVersionRE().FindStringSubmatch(s)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major > 3 || major == 3 && minor >= 2
}

// managers are the package managers a Build knows, in the order it looks
// for them: how each installs, and what it calls Docker (dockerd, its
// client, containerd and runc) and Compose. Debian 12's docker-compose is
// Compose 1 (docker-compose up); the others' are the CLI plugin (docker
// compose up).
//
// apt, as Debian's own container images set it up (an image of
// debootstrap's has none of it): no translations fetched; dpkg without an
// fsync per file (force-unsafe-io), as a Build that fails or is cut by a
// crash is thrown away whole and made anew; and neither the downloaded
// archives nor the package lists kept in the Build's layer, which every
// Sandbox of it carries. Measured on Docker's install: apt-get install
// 21 s against 29 s, 312 MB written against 457 MB.
var managers = []struct{ name, install, docker string }{
	{"apt-get", "export DEBIAN_FRONTEND=noninteractive\n\tapt-get update -q -o Acquire::Languages=none && apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-unsafe-io %s ca-certificates\n\tapt-get clean && rm -rf /var/lib/apt/lists/*", "docker.io docker-compose"},
	{"apk", "apk add --no-cache %s", "docker docker-cli-compose"},
	{"dnf", "dnf install -y %s", "moby-engine docker-compose"},
	{"microdnf", "microdnf install -y %s", "moby-engine docker-compose"},
	{"yum", "yum install -y %s", "docker"},
	{"zypper", "zypper -n install %s", "docker docker-compose"},
	{"pacman", "pacman -Sy --noconfirm %s", "docker docker-compose"},
}

// dockerPackage stands, in installScript's list, for the package manager's
// own name of Docker.
const dockerPackage = "docker"

// installScript installs pkgs with whichever package manager the image
// has, each one's name for Docker put in for dockerPackage. With none, it
// fails naming the ones it knows.
func installScript(pkgs []string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	var names []string
	for i, m := range managers {
		names = append(names, m.name)
		named := slices.Clone(pkgs)
		if i := slices.Index(named, dockerPackage); i >= 0 {
			named[i] = m.docker
		}
		kw := "elif"
		if i == 0 {
			kw = "if"
		}
		fmt.Fprintf(&b, "%s command -v %s >/dev/null 2>&1; then\n\techo 'installing with %s: %s'\n\t%s\n",
			kw, m.name, m.name, strings.Join(named, " "), fmt.Sprintf(m.install, strings.Join(named, " ")))
	}
	fmt.Fprintf(&b, "else\n\techo \"the image has no package manager kndl knows (%s): use an image with %s\" >&2\n\texit 1\nfi\n",
		strings.Join(names, ", "), strings.Join(pkgs, " "))
	return b.String()
}

// withPath makes sure a command finds the image's tools even when the
// image configures no PATH.
func withPath(env []string) []string {
	for _, kv := range env {
		if strings.HasPrefix(kv, "PATH=") {
			return env
		}
	}
	return append(append([]string(nil), env...), "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// lineWriter emits each complete line written to it, and keeps the last
// tailBytes of everything for an error.
type lineWriter struct {
	emit func(string)
	buf  []byte
	tail ringBuffer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.tail.Write(p)
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		w.emit(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(string(w.buf))
		w.buf = nil
	}
}

// ringBuffer keeps the last tailBytes written.
type ringBuffer struct{ b []byte }

func (r *ringBuffer) Write(p []byte) {
	r.b = append(r.b, p...)
	if len(r.b) > tailBytes {
		r.b = r.b[len(r.b)-tailBytes:]
	}
}

func (r *ringBuffer) String() string { return string(r.b) }

// or is s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
