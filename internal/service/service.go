// Package service writes, enables and removes the systemd units that run a
// kndl Hub and a Runner as services (kndl hub install, kndl runner install
// and their uninstall): the units, the environment file that holds the
// settings, the Hub's user and the state folders. It knows systemd, not
// kndl's settings: internal/daemon alone imports it and hands it those.
package service

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// File is one file install writes: its path as on the machine, its mode and
// what it holds.
type File struct {
	Path string
	Mode fs.FileMode
	Body string
}

// Machine is where the commands work: Root "/" for this machine, or a
// folder standing for a machine's root (an image being built, a test),
// where units are enabled but nothing is started.
type Machine struct {
	Root string
}

// Path is p on the machine, under Root.
func (m Machine) Path(p string) string { return filepath.Join(m.Root, p) }

// Live reports whether units can start here: the machine is this one and
// systemd runs it (sd_booted(3) checks the same folder).
func (m Machine) Live() bool {
	if filepath.Clean(m.Root) != "/" {
		return false
	}
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// Write writes f whole or not at all: a temporary file with f's mode,
// renamed over the old one, so a reader (systemd, or a Hub restarting) never
// sees half of it and the environment file is never readable by others,
// even for a moment. Folders above it are made 0755.
func (m Machine) Write(f File) error {
	p := m.Path(f.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(f.Mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(f.Body); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// Remove removes the file at p on the machine, and reports whether there
// was one.
func (m Machine) Remove(p string) (bool, error) {
	err := os.Remove(m.Path(p))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// CopyBinary puts the kndl running now at bin on the machine, unless it is
// that file already, and reports whether it copied.
func (m Machine) CopyBinary(bin string) (bool, error) {
	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	dst := m.Path(bin)
	a, errA := os.Stat(self)
	b, errB := os.Stat(dst)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return false, nil
	}
	src, err := os.ReadFile(self)
	if err != nil {
		return false, fmt.Errorf("read this kndl (%s) to copy it to %s: %w", self, bin, err)
	}
	return true, m.Write(File{Path: bin, Mode: 0o755, Body: string(src)})
}

// Systemctl runs systemctl on the machine: with --root on a folder, which
// edits the files only (enable, disable), as systemctl does offline.
func (m Machine) Systemctl(args ...string) error {
	if filepath.Clean(m.Root) != "/" {
		args = append([]string{"--root=" + m.Root}, args...)
	}
	return run("systemctl", args...)
}

// AddUser makes the system user conf (a sysusers.d(5) file, written
// before) declares, with systemd-sysusers, on the machine: a user made once
// and kept, as packages make theirs.
func (m Machine) AddUser(conf string) error {
	args := []string{m.Path(conf)}
	if filepath.Clean(m.Root) != "/" {
		args = []string{"--root=" + m.Root, m.Path(conf)}
	}
	return run("systemd-sysusers", args...)
}

// RemoveState removes the folder dir on the machine and what it holds,
// unless Unmounted refuses it.
func (m Machine) RemoveState(dir string) error {
	if err := m.Unmounted(dir); err != nil {
		return err
	}
	return os.RemoveAll(m.Path(dir))
}

// Unmounted returns an error if something is mounted under the folder dir
// on the machine: a Sandbox's disk or Workspace still in use, whose files
// a removal would reach into.
func (m Machine) Unmounted(dir string) error {
	p := m.Path(dir)
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(mounts)) {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == p || strings.HasPrefix(f[4], p+"/")) {
			return fmt.Errorf("%s is mounted under %s: a Sandbox still uses it; sleep or archive its Sessions while the Runner runs, then run this again", f[4], dir)
		}
	}
	return nil
}

func run(name string, args ...string) error {
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s is not installed here: install systemd (apt-get install systemd), which the services need", name)
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// Env is an environment file's settings, by name.
type Env map[string]string

// ReadEnv reads the environment file at p on the machine, as Render writes
// it: NAME=value or NAME="value" lines, and comments. None there is an
// empty Env; a line it can't read is an error naming it.
func (m Machine) ReadEnv(p string) (Env, error) {
	env := Env{}
	b, err := os.ReadFile(m.Path(p))
	if errors.Is(err, fs.ErrNotExist) {
		return env, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, v, ok := strings.Cut(line, "=")
		if q, isQuoted := strings.CutPrefix(v, `"`); isQuoted {
			v, ok = strings.CutSuffix(q, `"`)
			ok = ok && !strings.ContainsAny(v, `"\`)
		}
		if !ok || !envName.MatchString(name) {
			return nil, fmt.Errorf("%s, line %d: want NAME=value; correct or remove the line and run this again", p, n)
		}
		env[name] = v
	}
	return env, sc.Err()
}

var (
	envName = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*$`)
	// bare are values systemd's environment file parser takes as they are.
	bare = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,*-]*$`)
)

// Render is the environment file: header, then each setting sorted by
// name. A value systemd would read otherwise than written (quotes,
// backslashes, $, a newline) is refused, naming the setting.
func (e Env) Render(header string) (string, error) {
	names := make([]string, 0, len(e))
	for n := range e {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(header)
	for _, n := range names {
		v := e[n]
		switch {
		case bare.MatchString(v):
			fmt.Fprintf(&b, "%s=%s\n", n, v)
		case strings.ContainsAny(v, "\"\\$`") || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
			return "", fmt.Errorf("%s holds a quote, backslash, $, backquote or control character, which an environment file would change: set it in the file by hand, or use its _FILE form where it has one (GITHUB_APP_PRIVATE_KEY_FILE)", n)
		default:
			fmt.Fprintf(&b, "%s=\"%s\"\n", n, v)
		}
	}
	return b.String(), nil
}
