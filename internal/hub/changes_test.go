package hub

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
)

// TestChangesSayTheyWaitForAGoneRunnerOrOneOfProtocol5: a Session's
// changes are on its Runner's disk, so with that Runner gone, or speaking
// protocol 5 (no session.diff), the Hub answers 503 saying what the
// changes wait for, and never asks another Runner.
func TestChangesSayTheyWaitForAGoneRunnerOrOneOfProtocol5(t *testing.T) {
	f := newFixture(t)
	s, _ := attachSession(t, f)
	code, body := f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/changes", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "is not connected; its changes show once it is back") {
		t.Errorf("its Runner gone: %d %s", code, body)
	}
	c := connectRunner(t, f, f.rtoken)
	if err := c.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 5, MaxVersion: 5, Models: claude.Models(), Name: "r1"}, nil); err != nil {
		t.Fatalf("a version 5 Runner's hello: %v", err)
	}
	code, body = f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/changes", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "speaks protocol 5") || !strings.Contains(body, "updates it to a kndl of protocol 6") {
		t.Errorf("its Runner of protocol 5: %d %s", code, body)
	}
}
