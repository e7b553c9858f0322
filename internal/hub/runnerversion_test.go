package hub

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// TestTheRunnersPageShowsEachRunnersVersionAndWarnsOfAnOldOne: a Runner
// on an older protocol version than the Hub's shows its build and a
// warning on the Runners page and in the Hub's log; one refused for too
// old a protocol shows why, offline.
func TestTheRunnersPageShowsEachRunnersVersionAndWarnsOfAnOldOne(t *testing.T) {
	log := &lockedBuffer{b: &bytes.Buffer{}}
	f := newFixture(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(log, nil)) })
	ctx := context.Background()
	u, _ := f.store.Members.DevUser(ctx)
	old := protocol.Build{Version: "v1.1.0", Commit: "0123456789abcdef", Date: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	c := connectRunner(t, f, f.rtoken)
	if err := c.Request(ctx, protocol.TypeHello, protocol.Hello{MinVersion: protocol.MinVersion, MaxVersion: protocol.Version - 1,
		Models: claude.Models(), Name: "r1", Build: old}, nil); err != nil {
		t.Fatalf("hello: %v", err)
	}
	testenv.Eventually(t, testenv.WaitShort, "hub sees the runner", func() bool { return f.hub.Connected(f.runner.ID) })

	refusedRn, refusedToken, err := f.store.Runners.CreateRunner(ctx, "r2", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	c2 := connectRunner(t, f, refusedToken)
	if err := c2.Request(ctx, protocol.TypeHello, protocol.Hello{MinVersion: 3, MaxVersion: protocol.MinVersion - 1, Name: "r2",
		Build: protocol.Build{Version: "v0.9.0"}}, nil); err == nil {
		t.Fatal("a hello below the Hub's protocol.MinVersion was taken")
	}

	pages := pagesAPI{core: f.hub.core, place: newPlacer(f.hub), runners: f.hub.runners}
	w := httptest.NewRecorder()
	pages.runnersPage(w, httptest.NewRequest("GET", "/runners", nil), Principal{Kind: auth.Cookie, User: u})
	body := html.UnescapeString(w.Body.String())
	row := func(id string) string {
		_, after, _ := strings.Cut(body, `data-id="`+id+`"`)
		got, _, _ := strings.Cut(after, "</tr>")
		return got
	}
	for _, tt := range []struct{ runner, want string }{
		{f.runner.ID, "v1.1.0, 0123456 of 2026-12-03"},
		{f.runner.ID, fmt.Sprintf(`<p class="warning">It speaks protocol version %d, older than the Hub's %d`, protocol.Version-1, protocol.Version)},
		{refusedRn.ID, "v0.9.0"},
		{refusedRn.ID, `<p class="warning">Its last hello, at `},
		{refusedRn.ID, fmt.Sprintf("no common protocol version: runner speaks 3..%d, hub %d..%d", protocol.MinVersion-1, protocol.MinVersion, protocol.Version)},
	} {
		if got := row(tt.runner); !strings.Contains(got, tt.want) {
			t.Errorf("the Runners page's row of %s: got %q, want it to hold %q", tt.runner, got, tt.want)
		}
	}
	logged := log.String()
	for _, want := range []string{"runner older than the hub supports: It speaks protocol version", "runner refused", "no common protocol version"} {
		if !strings.Contains(logged, want) {
			t.Errorf("the Hub's log: got %q, want it to hold %q", logged, want)
		}
	}
}

// lockedBuffer is a log's writer that the Hub's goroutines share.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
