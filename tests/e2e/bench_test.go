package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// reportMedian reports the median of durations as a metric, since these
// machines are noisy.
func reportMedian(b *testing.B, ds []time.Duration, name string) {
	b.ReportMetric(float64(median(ds).Microseconds())/1000, name)
}

// median is the median of ds, which it leaves as they are.
func median(ds []time.Duration) time.Duration {
	sorted := slices.Sorted(slices.Values(ds))
	return sorted[len(sorted)/2]
}

// BenchmarkSessionStart times a Session's start from a warm Build with
// Claude Code cached: from POST /api/sessions to Claude Code showing its
// prompt (the Session Active).
func BenchmarkSessionStart(b *testing.B) {
	s := Start(b)
	benchStarts(b, s, s.Repo())
}

// BenchmarkSessionStartWithGitHub is BenchmarkSessionStart on a Repo of
// the fake GitHub with the App on it: the host clone on its read-only
// token, and the Sandbox token written while Claude Code starts.
func BenchmarkSessionStartWithGitHub(b *testing.B) {
	s := Start(b, WithSandboxGitHub(time.Minute))
	benchStarts(b, s, s.GitHubRepo("acme/app"))
}

// BenchmarkSessionStartWithDependencyDisk is BenchmarkSessionStart on a
// Repo whose Environment (applied after its Test build) keeps
// node_modules and .venv on the dependency disk, with three package.json
// and a pyproject.toml among 200 other files: the Workspace searched and
// four folders bound at each start.
func BenchmarkSessionStartWithDependencyDisk(b *testing.B) {
	s := Start(b)
	files := map[string]string{"package.json": "{}", "web/package.json": "{}", "api/package.json": "{}", "tools/pyproject.toml": ""}
	for i := range 200 {
		files[fmt.Sprintf("src/pkg%d/file%d.go", i%20, i)] = "package x\n"
	}
	repo := s.RepoWith(files)
	var r api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": repo}, &r)
	base := "/api/repos/" + r.ID + "/environment"
	s.Do(http.MethodPut, base+"/draft", api.EnvironmentSettings{DependencyFolders: []string{"node_modules", ".venv"},
		NextTo: map[string]string{"package.json": "node_modules", "pyproject.toml": ".venv"}}, nil)
	if t := runTestBuild(b, s, base); !strings.Contains(t.Log, "dependency disk: bound 4 folders") {
		b.Fatalf("the Test build bound other than the four folders:\n%s", t.Log)
	}
	if code := s.Do(http.MethodPost, base+"/apply", nil, nil); code != http.StatusOK {
		b.Fatalf("apply: %d", code)
	}
	benchStarts(b, s, repo)
}

// benchStarts times Sessions on repo from POST /api/sessions to Active,
// after one that warms the image, the Build and Claude Code.
func benchStarts(b *testing.B, s *System, repo string) {
	s.Model.On(testkit.PromptContains("warm up"), testkit.Text("ok"))
	w := s.NewSession(repo, "warm up")
	s.WaitEvent(w.ID, testenv.WaitBuild, "the warm-up turn's end", kind(protocol.EventTurnEnd))
	var ds []time.Duration
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		v := s.NewSession(repo, fmt.Sprintf("bench start %d", i))
		for {
			var got api.SessionView
			s.Do(http.MethodGet, "/api/sessions/"+v.ID, nil, &got)
			if got.State == api.Active {
				break
			}
			if got.State != api.Starting || time.Since(start) > testenv.WaitMedium {
				b.Fatalf("session %s is %s: %s", v.ID, got.State, got.StateDetail)
			}
			time.Sleep(5 * time.Millisecond)
		}
		ds = append(ds, time.Since(start))
		b.StopTimer()
		s.Backend.Remove(context.Background(), "s-"+v.ID)
		b.StartTimer()
	}
	reportMedian(b, ds, "ms/start-median")
}

// BenchmarkPromptToFirstEvent times a queued prompt to its first Event at
// the Hub (the mod's turn_start), model time excluded: the model answers at
// once, and only the path Hub -> Runner -> tmux -> Claude Code -> hook ->
// relay -> Hub is timed. It runs for a short prompt and for 1, 8 and 64
// KiB ones (api.MaxPromptBytes), on one Session.
func BenchmarkPromptToFirstEvent(b *testing.B) {
	s := Start(b)
	v := s.Ready("bench prompts", "ok")
	next := watchEvents(b, s, v.ID)
	for _, size := range []struct {
		name  string
		bytes int
	}{{"short", 0}, {"1KiB", 1 << 10}, {"8KiB", 8 << 10}, {"64KiB", api.MaxPromptBytes}} {
		b.Run("size="+size.name, func(b *testing.B) {
			var ds []time.Duration
			for i := 0; b.Loop(); i++ {
				text := benchPrompt(fmt.Sprintf("bench prompt %s %d", size.name, i), size.bytes)
				start := time.Now()
				s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: text}, &api.Prompt{})
				next(b, protocol.EventTurnStart)
				ds = append(ds, time.Since(start))
				b.StopTimer()
				next(b, protocol.EventTurnEnd)
				b.StartTimer()
			}
			reportMedian(b, ds, "ms/first-event-median")
		})
	}
}

// benchPrompt is head followed by lines of text up to size bytes in all (or
// head alone when size is smaller).
func benchPrompt(head string, size int) string {
	var sb strings.Builder
	sb.WriteString(head)
	for i := 0; sb.Len() < size; i++ {
		fmt.Fprintf(&sb, "\nline %d: all work and no play makes a «long» prompt ✓", i)
	}
	text := sb.String()
	for len(text) > max(size, len(head)) {
		_, n := utf8.DecodeLastRuneInString(text)
		text = text[:len(text)-n]
	}
	return text
}

// BenchmarkTestBuild times a Test build of a draft whose Start script is
// one line, on a warm Build: from POST .../environment/tests to its end
// (a fresh clone, a Sandbox made, the script, the Sandbox removed).
func BenchmarkTestBuild(b *testing.B) {
	s := Start(b)
	var repo api.Repo
	s.Do(http.MethodPost, "/api/repos", map[string]string{"url": s.Repo()}, &repo)
	base := "/api/repos/" + repo.ID + "/environment"
	s.Do(http.MethodPut, base+"/draft", api.EnvironmentSettings{Start: "echo ready\n"}, nil)
	runTestBuild(b, s, base) // the image and the Build, once
	var ds []time.Duration
	for b.Loop() {
		start := time.Now()
		runTestBuild(b, s, base)
		ds = append(ds, time.Since(start))
	}
	reportMedian(b, ds, "ms/test-build-median")
}

// runTestBuild runs a Test build of the draft of the Environment at base
// and returns it once passed.
func runTestBuild(b *testing.B, s *System, base string) api.TestBuild {
	start := time.Now()
	var t api.TestBuild
	s.Do(http.MethodPost, base+"/tests", nil, &t)
	for t.State != "passed" {
		if t.State == "failed" || time.Since(start) > testenv.WaitBuild {
			b.Fatalf("Test build %s: %s %s\n%s", t.ID, t.State, t.Detail, t.Log)
		}
		time.Sleep(5 * time.Millisecond)
		s.Do(http.MethodGet, base+"/tests/"+t.ID, nil, &t)
	}
	return t
}

// watchEvents watches a Session's Events from the last one on, and returns
// a function that waits for the next Event of a kind and says when it came.
func watchEvents(b *testing.B, s *System, id string) func(b *testing.B, kind string) time.Time {
	ctx := context.Background()
	evs := s.Events(id)
	u := strings.Replace(s.URL, "http", "ws", 1) + fmt.Sprintf("/api/sessions/%s/watch?after=%d", id, evs[len(evs)-1].Seq)
	ws, _, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + s.cli}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ws.CloseNow() })
	ws.SetReadLimit(1 << 20) // a 64 KiB prompt's Event, JSON-escaped
	return func(b *testing.B, kind string) time.Time {
		for {
			_, raw, err := ws.Read(ctx)
			if err != nil {
				b.Fatal(err)
			}
			var m api.LiveMessage
			json.Unmarshal(raw, &m)
			if m.Event != nil && m.Event.Kind == kind {
				return time.Now()
			}
		}
	}
}
