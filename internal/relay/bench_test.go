package relay

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/testkit"
)

// BenchmarkAModelRequest times one streamed Messages request and its whole
// answer from the fake Anthropic: sent to it directly, and through the
// relay with the placeholder checked and swapped for the Creator's token,
// as Claude Code's calls go in both HUB_CLAUDE_TOKEN modes. The difference
// is what the relay adds to each model request.
func BenchmarkAModelRequest(b *testing.B) {
	model := testkit.NewAnthropic(b, creatorToken)
	model.On(testkit.PromptContains("hello"), testkit.Text("hi from the model"))
	r, err := New(Options{HubURL: "http://127.0.0.1:9", ModelURL: model.URL, Logger: slog.New(slog.DiscardHandler),
		Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	tok, placeholder := r.Issue("s1", netip.Addr{}), Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct{ name, base, bearer string }{
		{"direct", model.URL, creatorToken},
		{"relay", srv.URL + "/model/" + tok, placeholder},
	} {
		b.Run(mode.name, func(b *testing.B) {
			// One client kept alive across requests, as Claude Code's is.
			client := &http.Client{Transport: &http.Transport{}}
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, mode.base+"/v1/messages?beta=true", strings.NewReader(messagesBody))
				req.Header.Set("Authorization", "Bearer "+mode.bearer)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				answer, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), "message_stop") {
					b.Fatalf("%d %s", resp.StatusCode, answer)
				}
			}
		})
	}
}
