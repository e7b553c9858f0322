package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
)

// A whole mod or Session token (the prefixes alone are in the kndl binary).
var (
	modToken     = regexp.MustCompile(`kndlm_[A-Za-z0-9_-]{43}`)
	sessionToken = regexp.MustCompile(`kndls_[A-Za-z0-9_-]{43}`)
)

// TestNoModTokenInTheSandboxAndTheRelayWantsALiveSessionToken: in one
// Session (HUB_CLAUDE_TOKEN=sandbox, so the Creator's token is in Claude
// Code's environment to be looked for), the relay, called from inside the
// Sandbox where the attacker is, refuses what carries no live Session
// token from that Sandbox; then no mod token is anywhere but the Runner's
// memory. First, the Sandbox is on the backend the Runner says it runs.
func TestNoModTokenInTheSandboxAndTheRelayWantsALiveSessionToken(t *testing.T) {
	s := Start(t, WithClaudeTokenInSandbox())
	v := s.Ready("token check", "ok")
	t.Run("the backend", func(t *testing.T) { s.runsOnItsBackend(t, v.ID) })
	t.Run("the relay refuses", func(t *testing.T) { s.relayRefusesWithoutALiveSessionToken(t, v.ID) })
	t.Run("no mod token", func(t *testing.T) { s.noModToken(t, v.ID) })
}

// relayRefusesWithoutALiveSessionToken calls the relay from inside the
// Session's Sandbox.
func (s *System) relayRefusesWithoutALiveSessionToken(t *testing.T, id string) {
	url := s.RelayURL() + "/mod/hook"
	tests := []struct{ name, header string }{
		{"no token", ""},
		{"wrong token", "Authorization: Bearer kndls_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"not a bearer", "Authorization: Basic a25kbDprbmRs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"busybox", "wget", "-q", "-O-", "--post-data", "{}"}
			if tt.header != "" {
				args = append(args, "--header", tt.header)
			}
			out, code := s.Exec(id, append(args, url)...)
			if code == 0 || !strings.Contains(out, "401") {
				t.Fatalf("relay answered %q (exit %d), want 401", out, code)
			}
		})
	}
	// Only /mod/* is relayed: the Hub's API is not reachable through it.
	out, code := s.Exec(id, "busybox", "wget", "-q", "-O-", s.RelayURL()+"/api/sessions")
	if code == 0 || !strings.Contains(out, "404") {
		t.Fatalf("relay relayed /api/sessions: %q (exit %d)", out, code)
	}

	// The Session's own token works only from its Sandbox's address: from
	// the host, another address, it is no token at all.
	env, err := claudeEnviron(t, s, id)
	token := sessionToken.Find(env)
	if err != nil || token == nil {
		t.Fatalf("Claude Code's Session token: %v", err)
	}
	out, _ = s.Exec(id, "busybox", "wget", "-S", "-O-", "--header", "Authorization: Bearer "+string(token), s.RelayURL()+"/mod/e2e-probe")
	if strings.Contains(out, " 401 ") || !strings.Contains(out, "HTTP/1.1 ") {
		t.Fatalf("the Session token from its own Sandbox: %q, want it relayed", out)
	}
	req, _ := http.NewRequest("GET", "http://"+s.Backend.Host().Relay+"/mod/e2e-probe", nil)
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the Session token from the host: %d, want 401", resp.StatusCode)
	}
}

// noModToken checks every process's environment and command line on the
// host (Sandboxes' processes included) and every file of the Runner's and
// the runtime's state for a mod token: it lives in the Runner's memory
// alone. The Creator's setup token (with HUB_CLAUDE_TOKEN=sandbox) and the
// Session token reach Claude Code's environment by design, never a disk.
func (s *System) noModToken(t *testing.T, id string) {

	// The Session token is where it must be, so the search below is real.
	env, err := claudeEnviron(t, s, id)
	if err != nil || !sessionToken.Match(env) || !bytes.Contains(env, []byte(claudeToken)) {
		t.Fatalf("Claude Code's environment lacks the Session or setup token (err %v)", err)
	}
	// Every process of the Sandbox as the Sandbox sees them: on gVisor none
	// of them is a host process, so the host's /proc below does not list them.
	if env, _ := s.Exec(id, "bash", "-c", "cat /proc/[0-9]*/environ 2>/dev/null"); modToken.MatchString(env) {
		t.Error("a process in the Sandbox holds a mod token in its environment")
	}
	if cmdlines, _ := s.Exec(id, "bash", "-c", "cat /proc/[0-9]*/cmdline 2>/dev/null"); modToken.MatchString(cmdlines) ||
		sessionToken.MatchString(cmdlines) || strings.Contains(cmdlines, claudeToken) {
		t.Error("a process in the Sandbox holds a token on its command line")
	}

	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		for _, f := range []string{"environ", "cmdline"} {
			b, _ := os.ReadFile(filepath.Join(p, f))
			if modToken.Match(b) {
				t.Errorf("%s/%s holds a mod token", p, f)
			}
			if f == "cmdline" && (bytes.Contains(b, []byte(claudeToken)) || sessionToken.Match(b)) {
				t.Errorf("%s/cmdline holds a token: %q", p, b)
			}
		}
	}
	// The kndl binary, built before any token was made, is left out: its
	// string table runs the token prefixes together ("kndlm_kndls_…"),
	// which the patterns would take for a token.
	bin, err := os.ReadFile(s.runnerCfg.Binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{s.Home, "/var/lib/kndl", "/run/crun"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			b, _ := os.ReadFile(path)
			if bytes.Equal(b, bin) {
				return nil
			}
			if modToken.Match(b) || sessionToken.Match(b) || bytes.Contains(b, []byte(claudeToken)) {
				t.Errorf("%s holds a token", path)
			}
			return nil
		})
	}
}

// claudePID finds the pid of a Session's Claude Code as its Sandbox sees
// it: on every backend, gVisor's among them, where no process of a Sandbox
// is a host process. Just after a start two may show for a moment, or none
// yet: it waits a little for exactly one.
func claudePID(t *testing.T, s *System, sessionID string) string {
	t.Helper()
	var pid string
	testenv.Eventually(t, testenv.WaitShort, "one Claude Code process for session "+sessionID, func() bool {
		pid = claudeProcess(s, sessionID)
		return pid != ""
	})
	return pid
}

// claudeEnviron is the environment of a Session's Claude Code, read inside
// its Sandbox (on every backend).
func claudeEnviron(t *testing.T, s *System, sessionID string) ([]byte, error) {
	t.Helper()
	out, code := s.Exec(sessionID, "cat", "/proc/"+claudePID(t, s, sessionID)+"/environ")
	if code != 0 {
		return nil, fmt.Errorf("cat its environ: exit %d: %s", code, out)
	}
	return []byte(out), nil
}

// claudeProcess is the pid of a Session's Claude Code inside its Sandbox,
// or "" unless exactly one runs (none while a restart has its Sandbox
// stopped; any other failure to look fails the test).
func claudeProcess(s *System, sessionID string) string {
	out, _, err := s.tryExec(sessionID, "bash", "-c", `for p in /proc/[0-9]*; do
		case "$(tr '\0' ' ' <$p/cmdline 2>/dev/null)" in "/opt/kndl/claude-code/claude "*`+sessionID+`*) echo ${p#/proc/};; esac; done`)
	if err != nil && !errors.Is(err, sandbox.ErrNotRunning) {
		s.t.Fatal(err)
	}
	pid := strings.TrimSpace(out)
	if strings.Contains(pid, "\n") {
		return ""
	}
	return pid
}
