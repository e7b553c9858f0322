package relay

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// counts keeps what a relay's Counted was told, the last count of each
// reply.
type counts struct {
	mu  sync.Mutex
	got map[string]protocol.Usage // by session and Message id
}

func (c *counts) counted(sessionID string, u protocol.Usage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got[sessionID+"/"+u.Message] = u
}

func (c *counts) all() map[string]protocol.Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]protocol.Usage{}
	for k, v := range c.got {
		out[k] = v
	}
	return out
}

// countingRelay is a relay to model whose Session s1 holds the Creator's
// token, and what it counts.
func countingRelay(t *testing.T, model string) (srv, tok, placeholder string, c *counts) {
	t.Helper()
	c = &counts{got: map[string]protocol.Usage{}}
	r, err := New(Options{HubURL: "http://127.0.0.1:9", ModelURL: model, Logger: slog.New(slog.DiscardHandler), Counted: c.counted,
		Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	tok = r.Issue("s1", netip.Addr{})
	placeholder = Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	return s.URL, tok, placeholder, c
}

// TestTheRelayCountsWhatTheModelAPISaysAReplySpent: a model reply's usage
// is read from the model API's own answer as it passes the relay,
// streamed or whole, compressed or not, whatever the Sandbox does with it.
func TestTheRelayCountsWhatTheModelAPISaysAReplySpent(t *testing.T) {
	spent := testkit.Usage{Input: 1200, Output: 56, CacheRead: 4000, CacheWrite: 300}
	want := claude.Tokens{Input: 1200, Output: 56, CacheRead: 4000, CacheWrite: 300}
	tests := []struct {
		name, body, encoding string
	}{
		{"streamed", messagesBody, ""},
		{"whole", strings.Replace(messagesBody, `"stream":true`, `"stream":false`, 1), ""},
		{"streamed, Claude Code asking for compression", messagesBody, "br, gzip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := testkit.NewAnthropic(t, creatorToken)
			model.On(testkit.PromptContains("hello"), testkit.Text("hi from the model").WithUsage(spent))
			srv, tok, placeholder, c := countingRelay(t, model.URL)
			req, _ := http.NewRequest("POST", srv+"/model/"+tok+"/v1/messages", strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+placeholder)
			if tt.encoding != "" {
				req.Header.Set("Accept-Encoding", tt.encoding)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), "hi from the") {
				t.Fatalf("through the relay: %d %s, want the model's answer", resp.StatusCode, b)
			}
			var got map[string]protocol.Usage
			testenv.Eventually(t, testenv.WaitShort, "the reply counted", func() bool {
				got = c.all()
				return len(got) == 1
			})
			for k, u := range got {
				if !strings.HasPrefix(k, "s1/msg_") || u.Model != "claude-sonnet-5-5" || u.Tokens != want {
					t.Fatalf("counted %s: %+v, want s1's msg_… of claude-sonnet-5-5 with %+v", k, u, want)
				}
			}
		})
	}
}

// TestAGzippedAnswerIsCountedDecoded: the model API compresses its answer
// when asked; the relay asks itself, and reads it decoded.
func TestAGzippedAnswerIsCountedDecoded(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		body := `{"id":"msg_z","type":"message","model":"claude-sonnet-5-5","content":[],"usage":{"input_tokens":7,"output_tokens":3}}`
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			io.WriteString(w, body)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		z := gzip.NewWriter(w)
		io.WriteString(z, body)
		z.Close()
	}))
	t.Cleanup(model.Close)
	srv, tok, placeholder, c := countingRelay(t, model.URL)
	req, _ := http.NewRequest("POST", srv+"/model/"+tok+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+placeholder)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.(*http.Transport).RoundTrip(req) // Claude Code's own encoding, not Go's
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "msg_z") {
		t.Fatalf("Claude Code got %q, want the answer readable", b)
	}
	if got := c.all()["s1/msg_z"]; got.Input != 7 || got.Output != 3 {
		t.Fatalf("counted %+v, want 7 in and 3 out", got)
	}
}

// TestAStreamCutShortIsCountedAtLeastAsFarAsItCame: a client that stops
// reading a stream before its message_delta still has the input counted,
// and its output at one token per three bytes that came.
func TestAStreamCutShortIsCountedAtLeastAsFarAsItCame(t *testing.T) {
	model := testkit.NewAnthropic(t, creatorToken)
	long := strings.Repeat("words and more words ", 200)
	r := testkit.Text(long).WithUsage(testkit.Usage{Input: 900, Output: 5000})
	r.Pace = 5 * time.Millisecond
	model.On(testkit.PromptContains("hello"), r)
	srv, tok, placeholder, c := countingRelay(t, model.URL)
	req, _ := http.NewRequest("POST", srv+"/model/"+tok+"/v1/messages", strings.NewReader(messagesBody))
	req.Header.Set("Authorization", "Bearer "+placeholder)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	read := 0
	for read < 2000 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended at %d bytes: %v", read, err)
		}
		read += len(line)
	}
	resp.Body.Close()
	var got protocol.Usage
	testenv.Eventually(t, testenv.WaitShort, "the cut stream counted", func() bool {
		for _, u := range c.all() {
			got = u
		}
		return got.Input == 900 && got.Output*3 >= 2000-1000 // what came, less message_start's
	})
	if got.Output >= 5000 {
		t.Fatalf("counted %d out, want what came before the cut", got.Output)
	}
}

// TestACappedSessionsModelRequestsAreRefusedInTheAPIsShape: past a spend
// cap, the relay answers each model request of the run itself, as the
// model API answers an error (which Claude Code shows), naming the cap;
// nothing reaches the model.
func TestACappedSessionsModelRequestsAreRefusedInTheAPIsShape(t *testing.T) {
	model := testkit.NewAnthropic(t, creatorToken)
	model.On(testkit.PromptContains("hello"), testkit.Text("hi"))
	c := &counts{got: map[string]protocol.Usage{}}
	r, err := New(Options{HubURL: "http://127.0.0.1:9", ModelURL: model.URL, Logger: slog.New(slog.DiscardHandler), Counted: c.counted,
		Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	tok := r.Issue("s1", netip.Addr{})
	placeholder := Placeholder(creatorToken)
	r.Hold("s1", creatorToken, placeholder)
	if err := r.Cap("s1", "Spend cap reached: its Repo's cap of $5.00 a day (--max-spend)."); err != nil {
		t.Fatal(err)
	}
	resp := doModel(t, srv.URL, tok, placeholder)
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadRequest || body.Type != "error" || body.Error.Type != "invalid_request_error" || !strings.Contains(body.Error.Message, "--max-spend") {
		t.Fatalf("got %d %+v, want 400 invalid_request_error naming the cap", resp.StatusCode, body)
	}
	if n := len(model.Requests()); n != 0 {
		t.Fatalf("the model saw %d requests, want none", n)
	}
}
