package claude_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/mod"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestRealTheModsHooksReachTheRelay: with the mod's plugins loaded, as the
// Runner starts it, Claude Code runs each hook's client (hook.bash) from
// the plugin's own directory, and every hook of a Bash Turn reaches the
// relay at KNDL_URL with the Session token.
func TestRealTheModsHooksReachTheRelay(t *testing.T) {
	s := newSession(t)
	var mu sync.Mutex
	var got []string
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Name string `json:"hook_event_name"`
		}
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/mod/hook" || r.Header.Get("Authorization") != "Bearer "+s.Launch.SessionToken || json.Unmarshal(b, &ev) != nil {
			t.Errorf("the relay got %s %s with %q: %s", r.Method, r.URL.Path, r.Header.Get("Authorization"), b)
			http.Error(w, "not a hook event", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev.Name)
		mu.Unlock()
		io.WriteString(w, "{}")
	}))
	defer relay.Close()
	dir := filepath.Join(t.TempDir(), "mod")
	if err := mod.WriteCopy(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range mod.Plugins {
		s.Launch.PluginDirs = append(s.Launch.PluginDirs, filepath.Join(dir, p))
	}
	s.Launch.RelayURL = relay.URL
	s.API.On(testkit.PromptContains("list the files"), testkit.Bash("ls"))
	s.API.On(testkit.AfterToolResult(), testkit.Text("Listed."))
	s.Start(false)
	s.Send("list the files")
	want := []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"}
	testenv.EventuallyShowing(t, testenv.WaitMedium, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return "the relay got hooks " + fmtList(got) + ", want each of " + fmtList(want)
	})
}

func fmtList(s []string) string { b, _ := json.Marshal(s); return string(b) }
