package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox/oci"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestSensitiveVariablesReachTheProcessButNeverTheTranscriptOrADisk: a
// Repo's Sensitive Variable and a linked Shared one are in Claude Code's
// environment (its Bash tool prints them), the transcript shows only *s
// where they were, and no file of the Hub or the Runner holds them. One
// value holds Markdown's marks, which Claude Code's terminal drops as it
// prints the text in italics: none of it shows there either.
func TestSensitiveVariablesReachTheProcessButNeverTheTranscriptOrADisk(t *testing.T) {
	t.Parallel()
	s := Start(t)
	const repoSecret = "s3cr3t-repo-value-4e2e"
	const sharedSecret = "sh4red-npm-token-value"
	const markdownSecret = "mk-_it4l1c_-and-*b0ld*-9z"
	repo := s.Repo()
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/MY_SECRET", api.VariableRequest{Value: repoSecret, Sensitive: true}, &api.Variable{})
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/MD_SECRET", api.VariableRequest{Value: markdownSecret, Sensitive: true}, &api.Variable{})
	s.Do(http.MethodPut, "/api/repos/"+r.ID+"/variables/REGION", api.VariableRequest{Value: "eu-north-1"}, &api.Variable{})
	s.Do(http.MethodPut, "/api/variables/NPM_TOKEN", api.VariableRequest{Value: sharedSecret, Sensitive: true}, &api.Variable{})
	if code := s.Do(http.MethodPut, "/api/repos/"+r.ID+"/links/NPM_TOKEN", nil, nil); code != http.StatusNoContent {
		t.Fatalf("link: %d", code)
	}
	// Write-only: listing shows who set it and when, never the value.
	var listed api.RepoVariables
	s.Do(http.MethodGet, "/api/repos/"+r.ID+"/variables", nil, &listed)
	raw, _ := jsonOf(listed)
	if strings.Contains(raw, repoSecret) || strings.Contains(raw, sharedSecret) || !strings.Contains(raw, "eu-north-1") || !strings.Contains(raw, "set_at") {
		t.Fatalf("the listing shows a Sensitive value, or not the plain one: %s", raw)
	}

	s.Model.On(testkit.PromptContains("show the env"), testkit.Bash("printenv MY_SECRET; printenv REGION; printenv NPM_TOKEN"))
	s.Model.On(testkit.AfterToolResult(), testkit.Text("The repo secret is "+repoSecret+" and the JSON is {\"t\":\""+sharedSecret+"\"}. The markdown one is "+markdownSecret+" here."))
	v := s.NewSession(repo, "show the env")
	s.WaitEvent(v.ID, testenv.WaitBuild, "the answer", func(e protocol.Event) bool {
		return e.Kind == protocol.EventText && strings.Contains(e.Text, "repo secret")
	})

	// The process had the values.
	env, _ := claudeEnviron(t, s, v.ID)
	for _, kv := range []string{"MY_SECRET=" + repoSecret, "NPM_TOKEN=" + sharedSecret, "REGION=eu-north-1"} {
		if !bytes.Contains(env, append([]byte(kv), 0)) {
			t.Errorf("Claude Code's environment lacks %s", strings.SplitN(kv, "=", 2)[0])
		}
	}
	// The transcript masks them, character for character.
	stars := func(v string) string { return strings.Repeat("*", len(v)) }
	result, text := s.lastResultAndText(v.ID)
	if result.Text != stars(repoSecret)+"\neu-north-1\n"+stars(sharedSecret) {
		t.Errorf("tool output = %q, want the values masked and the plain one shown", result.Text)
	}
	if !strings.Contains(text.Text, "The repo secret is "+stars(repoSecret)) || strings.Contains(text.Text, sharedSecret) || strings.Contains(text.Text, "it4l1c") {
		t.Errorf("Claude's text = %q, want the values masked", text.Text)
	}
	// The terminal shows Claude Code's screen with the answer on it: its
	// frames carry *s where the values were.
	screen := terminalBytes(t, s, v.ID, " here.")
	if bytes.Contains(screen, []byte(repoSecret)) || bytes.Contains(screen, []byte(sharedSecret)) {
		t.Errorf("a terminal frame holds a Sensitive value")
	}
	if !bytes.Contains(screen, []byte(" here.")) {
		t.Errorf("the terminal lacks the end of the answer; it showed:\n%q", screen)
	}
	for _, part := range []string{"it4l1c", "b0ld", "-9z"} {
		if bytes.Contains(screen, []byte(part)) {
			t.Errorf("a terminal frame holds part of the Sensitive value with Markdown's marks, %q:\n%q", part, screen)
		}
	}
	if !bytes.Contains(screen, []byte("The repo secret is "+stars(repoSecret))) {
		t.Errorf("the terminal lacks the masked answer; it showed:\n%s", screen)
	}

	// No file the Hub or the Runner writes holds them. The Session's own
	// disks and Workspace are left out: Claude Code keeps its transcript
	// there, tool output and all, inside the Sandbox's boundary (as the
	// spec says, what a process writes to disk stays there).
	runtime, _ := sandboxRuntime(t)
	sessionData := []string{filepath.Join(s.Home, "sandboxes", oci.DirName(runtime), "sandboxes", "s-"+v.ID, "disks"),
		filepath.Join(s.Home, "sandboxes", oci.DirName(runtime), "sandboxes", "s-"+v.ID, "upper"),
		filepath.Join(s.Home, "sessions", v.ID, "workspace")}
	if _, err := os.Stat(sessionData[0]); err != nil {
		t.Fatalf("the Session's disks are not where this test looks: %v", err)
	}
	for _, root := range []string{filepath.Dir(s.Home), "/var/lib/kndl", "/run/crun"} {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			for _, skip := range sessionData {
				if path == skip {
					return filepath.SkipDir
				}
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, _ := os.ReadFile(path)
			if bytes.Contains(b, []byte(repoSecret)) || bytes.Contains(b, []byte(sharedSecret)) || bytes.Contains(b, []byte(markdownSecret)) {
				t.Errorf("%s holds a Sensitive value", path)
			}
			return nil
		})
	}
}

// lastResultAndText returns a Session's last tool output and last text of
// Claude's.
func (s *System) lastResultAndText(id string) (result, text protocol.Event) {
	for _, e := range s.Events(id) {
		switch e.Kind {
		case protocol.EventToolResult:
			result = e
		case protocol.EventText:
			text = e
		}
	}
	return result, text
}

// terminalBytes opens a Session's terminal as its Creator, over the Session
// view's WebSocket, and returns what its frames carried once they show
// want (or after a deadline).
func terminalBytes(t *testing.T, s *System, id, want string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	ws := dialLive(t, ctx, s, id)
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"type":"terminal.open"}`)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		_, b, err := ws.Read(ctx)
		if err != nil {
			break
		}
		var m struct {
			Type string `json:"type"`
			Data []byte `json:"data"`
		}
		json.Unmarshal(b, &m)
		if m.Type == "terminal" {
			got = append(got, m.Data...)
		}
	}
	return got
}

// dialLive opens a Session's view WebSocket (/live) as its Creator; it
// closes when the test ends.
func dialLive(t *testing.T, ctx context.Context, s *System, id string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(s.URL, "http")+"/api/sessions/"+id+"/live",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.cli}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(16 << 20)
	return ws
}

// listening takes a list of the view's ports in which port n listens.
func listening(n int) func([]api.Port) bool {
	return func(l []api.Port) bool {
		return slices.ContainsFunc(l, func(p api.Port) bool { return p.Port.Port == n && p.Listening })
	}
}

// viewPorts returns the ports the Hub sends a Session's view, the first
// list that until takes (or the last one before a deadline).
func viewPorts(t *testing.T, s *System, id string, until func([]api.Port) bool) []api.Port {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitMedium)
	defer cancel()
	ws := dialLive(t, ctx, s, id)
	var last []api.Port
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return last
		}
		var m api.LiveMessage
		if json.Unmarshal(b, &m) != nil || m.Type != "ports" || m.Ports == nil {
			continue
		}
		last = *m.Ports
		if until(last) {
			return last
		}
	}
}
