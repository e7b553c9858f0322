package claude_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/mod"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestRealTheModsHooksReachTheRelay: with the mod's plugins loaded, as the
// Runner starts it in a Sandbox whose init serves the hook door, Claude
// Code posts each hook to the door on loopback as an http hook, with the
// Session token from its environment in the header, and every hook of a
// Bash Turn reaches the relay through the door with that token.
func TestRealTheModsHooksReachTheRelay(t *testing.T) {
	s := newSession(t)
	// A Session token as the relay makes them: Claude Code judges by name
	// and value whether it may put a variable in an http hook's header.
	s.Launch.SessionToken, _ = auth.NewToken(auth.Session)
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
	door := httptest.NewServer(mod.NewDoor(relay.URL))
	defer door.Close()
	modThroughDoor(t, s, door.URL)
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

// TestRealThePromptLeavesItsInputWhileItsHookIsHeld: Claude Code empties
// its input box as its UserPromptSubmit hook goes out, before the hook
// answers, so the hook's arrival is the word that a prompt was taken
// (internal/runner deliver.go, submitted).
func TestRealThePromptLeavesItsInputWhileItsHookIsHeld(t *testing.T) {
	s := newSession(t)
	s.Launch.SessionToken, _ = auth.NewToken(auth.Session)
	arrived, answer := make(chan struct{}), make(chan struct{})
	relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Name string `json:"hook_event_name"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &ev)
		if ev.Name == "UserPromptSubmit" {
			close(arrived)
			<-answer
		}
		io.WriteString(w, "{}")
	}))
	defer relay.Close()
	door := httptest.NewServer(mod.NewDoor(relay.URL))
	defer door.Close()
	// A held hook is let go before the door and the relay close: each
	// waits for its handlers.
	var release sync.Once
	defer release.Do(func() { close(answer) })
	modThroughDoor(t, s, door.URL)
	s.API.On(testkit.PromptContains("hold this prompt"), testkit.Text("Held."))
	s.Start(false)
	const prompt = "hold this prompt a while"
	s.Send(prompt)
	select {
	case <-arrived:
	case <-time.After(testenv.WaitMedium):
		t.Fatal("UserPromptSubmit never reached the relay")
	}
	testenv.Eventually(t, testenv.WaitMedium, "the input empties while the hook is held", func() bool {
		return !strings.Contains(inputBox(s.Screen()), prompt)
	})
	release.Do(func() { close(answer) })
}

// modThroughDoor gives s the mod's plugins, their hooks posting to the
// door at doorURL.
func modThroughDoor(t *testing.T, s *session, doorURL string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mod")
	if err := mod.WriteCopy(dir); err != nil {
		t.Fatal(err)
	}
	if err := mod.UseDoor(dir, doorURL); err != nil {
		t.Fatal(err)
	}
	for _, p := range mod.Plugins {
		s.Launch.PluginDirs = append(s.Launch.PluginDirs, filepath.Join(dir, p))
	}
}

// inputBox is the text between the last two rules of Claude Code's screen.
func inputBox(screen string) string {
	lines := strings.Split(screen, "\n")
	var rules []int
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "────") {
			rules = append(rules, i)
		}
	}
	if len(rules) < 2 {
		return ""
	}
	return strings.Join(lines[rules[len(rules)-2]+1:rules[len(rules)-1]], "\n")
}
