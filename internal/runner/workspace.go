package runner

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/redact"
)

// cloneEnv is the host clone's whole environment: no variable of the
// Runner's own (RUNNER_TOKEN among them) and no git config of the host's,
// system or global, so no filter, LFS smudge or credential helper the
// host set up runs on a Repo's files. ssh still finds the host's keys
// (it reads the user's home from the password file) and its agent.
func cloneEnv(home string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C.UTF-8",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_LFS_SKIP_SMUDGE=1",
		"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=/bin/false", "SSH_ASKPASS=/bin/false"}
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		env = append(env, "SSH_AUTH_SOCK="+sock)
	}
	return env
}

// safeGitConfig goes before the subcommand of every git the Runner runs on
// a Workspace, for that run only: no hook, no fsmonitor (each a command
// git would run) and no ext:: transport.
var safeGitConfig = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never"}

// cloneTokenEnv gives the clone a read-only token through its environment
// alone: a credential helper set by GIT_CONFIG_* (command-line config,
// which GIT_CONFIG_NOSYSTEM and GIT_CONFIG_GLOBAL leave on) that prints the
// token from a variable, so it is on no command line, in no URL and in no
// file of the clone.
func cloneTokenEnv(token string) []string {
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=credential.helper",
		`GIT_CONFIG_VALUE_0=!f() { test "$1" = get || return 0; echo username=x-access-token; printf 'password=%s\n' "$KNDL_CLONE_TOKEN"; }; f`,
		"KNDL_CLONE_TOKEN=" + token}
}

// cloned reports whether dir holds a Workspace already (a wake).
func cloned(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".git"))
	return err == nil
}

// cloneWorkspace clones a Session's Repo into dir on the Runner's host: the
// one thing the Runner runs git for ("Host git"). With token (the App's
// read-only token for the Repo) git uses it and nothing else of the
// host's; without, the host's own git credentials. Hooks and fsmonitor are
// off, nothing is written into the clone's config, so origin stays the
// Repo's plain URL, and a clone that fails leaves nothing behind and fails
// with git's message. A Workspace already there (a wake) is kept as it is.
//
// git connects only where out lets it: over http(s) through out's Proxy
// (http.proxy), so each address, a redirect's too, is checked as git
// connects; over ssh or git's own protocol, which no proxy sees, the
// host's addresses are checked first.
func cloneWorkspace(ctx context.Context, out *outbound.Dialer, repo, token, dir string, progress func(string)) error {
	if cloned(dir) {
		return nil
	}
	if host, port, ok := directRemote(repo); ok {
		if _, err := out.Resolve(ctx, "tcp", host, port); err != nil {
			return fmt.Errorf("git clone %s: %w", redact.Scrub(repo), err)
		}
	}
	proxy, err := out.ListenProxy(ctx)
	if err != nil {
		return err
	}
	defer proxy.Close()
	tmp := dir + ".clone"
	os.RemoveAll(tmp)
	progress("cloning " + redact.Scrub(repo))
	start := time.Now()
	home, err := os.MkdirTemp("", "kndl-clone-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	// -c before the subcommand applies to this run only; --template= keeps
	// git's sample hooks out of the clone.
	cmd := exec.CommandContext(ctx, "git", append(append([]string{}, safeGitConfig...),
		"-c", "http.proxy="+proxy.URL, "clone", "--quiet", "--template=", "--", repo, tmp)...)
	cmd.Env = cloneEnv(home)
	if token != "" {
		cmd.Env = append(cmd.Env, cloneTokenEnv(token)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		if refused := proxy.Refused(); refused != nil {
			return fmt.Errorf("git clone %s failed: %w", redact.Scrub(repo), refused)
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("git clone %s failed: %s", redact.Scrub(repo), redact.Scrub(msg))
	}
	exclude := filepath.Join(tmp, ".git", "info", "exclude")
	if err := os.MkdirAll(filepath.Dir(exclude), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(exclude, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	// Subagents' worktrees stay out of a git add -A in the Sandbox.
	_, err = f.WriteString("\n.claude/worktrees/\n")
	f.Close()
	if err != nil {
		return err
	}
	if err := recordBase(ctx, tmp, filepath.Join(filepath.Dir(dir), baseFile)); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	progress(fmt.Sprintf("cloned in %s", time.Since(start).Round(100*time.Millisecond)))
	return nil
}

// directRemote is the host and port of a Repo git reaches over ssh or
// git's own protocol (ssh://, git://, or scp-like user@host:path); ok is
// false for http(s), which goes through the proxy, and local paths.
func directRemote(repo string) (host string, port uint16, ok bool) {
	if scheme, _, found := strings.Cut(repo, "://"); found {
		u, err := url.Parse(repo)
		if err != nil {
			return "", 0, false
		}
		def := map[string]uint16{"ssh": 22, "git+ssh": 22, "ssh+git": 22, "git": 9418}[scheme]
		if def == 0 {
			return "", 0, false
		}
		port = def
		if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
			port = uint16(p)
		}
		return u.Hostname(), port, true
	}
	// scp-like: a colon before any slash.
	userHost, _, found := strings.Cut(repo, ":")
	if !found || strings.Contains(userHost, "/") {
		return "", 0, false
	}
	host = userHost[strings.LastIndex(userHost, "@")+1:]
	return strings.Trim(host, "[]"), 22, true
}
