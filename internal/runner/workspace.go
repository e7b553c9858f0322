package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

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
func cloneWorkspace(ctx context.Context, repo, token, dir string, progress func(string)) error {
	if cloned(dir) {
		return nil
	}
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
	cmd := exec.CommandContext(ctx, "git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
		"-c", "protocol.ext.allow=never", "clone", "--quiet", "--template=", "--", repo, tmp)
	cmd.Env = cloneEnv(home)
	if token != "" {
		cmd.Env = append(cmd.Env, cloneTokenEnv(token)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
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
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	progress(fmt.Sprintf("cloned in %s", time.Since(start).Round(100*time.Millisecond)))
	return nil
}
