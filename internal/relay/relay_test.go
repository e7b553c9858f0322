package relay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

type seen struct {
	path, auth string
}

func upstreamServer(t *testing.T, got chan<- seen) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.Header.Get("Authorization")}
		if strings.HasSuffix(r.URL.Path, "/stream") || r.Header.Get("Accept") == "text/event-stream" {
			// Two events with a pause: the relay must pass the first on at once.
			fmt.Fprint(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			time.Sleep(300 * time.Millisecond)
			fmt.Fprint(w, "data: two\n\n")
			return
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// hookEvent is one hook event the relay handed the Runner.
type hookEvent struct {
	session, body string
}

func newRelay(t *testing.T, hub, model string) (*httptest.Server, *Relay) {
	srv, r, _ := newRelayHooks(t, hub, model)
	return srv, r
}

// newRelayHooks is newRelay with the hook events it hands the Runner.
func newRelayHooks(t *testing.T, hub, model string) (*httptest.Server, *Relay, <-chan hookEvent) {
	hooks := make(chan hookEvent, 10)
	r, err := New(Options{HubURL: hub, ModelURL: model, Logger: slog.New(slog.DiscardHandler),
		Hook: func(_ context.Context, id string, body []byte) ([]byte, error) {
			hooks <- hookEvent{id, string(body)}
			return nil, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv, r, hooks
}

func do(t *testing.T, method, url, token string) *http.Response {
	t.Helper()
	return doBody(t, method, url, token, "{}")
}

// doBody is do with a body of its own.
func doBody(t *testing.T, method, url, token, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestSessionTokenIsSwappedForModToken(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	tok := r.Issue("s1", netip.Addr{})
	r.SetModToken("s1", "kndlm_secret")

	resp := do(t, "POST", srv.URL+"/mod/other", tok)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	s := <-got
	if s.path != "/mod/other" || s.auth != "Bearer kndlm_secret" {
		t.Fatalf("hub saw %+v, want /mod/other with the mod token", s)
	}
}

// TestGatewayTrafficGoesToTheHubWithTheModTokenAndStreams: Claude Code's
// MCP traffic at /gateway/* reaches the Hub with the mod token in the
// Session token's place, its answer streaming as it comes; without a live
// Session token it is 401, with no challenge.
func TestGatewayTrafficGoesToTheHubWithTheModTokenAndStreams(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	tok := r.Issue("s1", netip.Addr{})
	r.SetModToken("s1", "kndlm_secret")
	if resp := do(t, "POST", srv.URL+"/gateway/docs", "kndls_wrong"); resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("a wrong Session token: %d %q, want 401 without a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	start := time.Now()
	resp := do(t, "GET", srv.URL+"/gateway/docs/stream", tok)
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: one\n" || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("first event %q after %v: the stream was held back", line, time.Since(start))
	}
	if s := <-got; s.path != "/gateway/docs/stream" || s.auth != "Bearer kndlm_secret" {
		t.Fatalf("hub saw %+v, want /gateway/docs/stream with the mod token", s)
	}
}

// TestAnAnswerStreamsBackWhileItsRequestsBodyStillGoesUp: the relay hands
// a request's body on to the Hub while the answer already streams back. By
// default Go's HTTP/1 server consumes and closes a request's body as soon
// as its handler writes the answer (golang/go#40747), under the relay's
// Transport, which is still reading that body, if only to see its end:
// here the answer never comes; when the body was all sent, the Transport's
// last read fails instead and it drops its connection to the Hub, cutting
// the answer after its headers, which lost a Gateway tool call's answer
// (Claude Code: "HTTP connection dropped after 0s uptime").
func TestAnAnswerStreamsBackWhileItsRequestsBodyStillGoesUp(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An MCP server's SSE answer may begin before it reads the call.
		http.NewResponseController(w).EnableFullDuplex()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, ": ok\n\n")
		w.(http.Flusher).Flush()
		call, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		fmt.Fprintf(w, "data: answer to %s\n\n", call)
	}))
	t.Cleanup(hub.Close)
	srv, r := newRelay(t, hub.URL, "")
	tok := r.Issue("s1", netip.Addr{})
	r.SetModToken("s1", "kndlm_secret")

	ctx, cancel := context.WithTimeout(context.Background(), testenv.WaitShort)
	defer cancel()
	first, rest := `{"jsonrpc":"2.0","id":7,`, `"method":"tools/call"}`
	body, send := io.Pipe()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/gateway/docs", body)
	req.ContentLength = int64(len(first + rest))
	req.Header.Set("Authorization", "Bearer "+tok)
	// Past the deadline, unblock both ends, each stuck reading the rest.
	defer context.AfterFunc(ctx, func() { send.CloseWithError(ctx.Err()); srv.CloseClientConnections() })()
	go send.Write([]byte(first))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the answer's headers did not come back while the body went up: %v", err)
	}
	defer resp.Body.Close()
	go func() {
		send.Write([]byte(rest))
		send.Close()
	}()
	got, err := io.ReadAll(resp.Body)
	if want := ": ok\n\ndata: answer to " + first + rest + "\n\n"; err != nil || string(got) != want {
		t.Fatalf("answer %q, %v; want %q whole", got, err, want)
	}
}

// TestWhatTheProxyLogsIsInTheRelaysLog: an answer the Hub cuts mid-body
// is logged by the proxy itself, into the relay's log with its component,
// not by the process's default logger.
func TestWhatTheProxyLogsIsInTheRelaysLog(t *testing.T) {
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	t.Cleanup(hub.Close)
	var log testkit.Buffer
	r, err := New(Options{HubURL: hub.URL, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	tok := r.Issue("s1", netip.Addr{})
	r.SetModToken("s1", "kndlm_secret")
	resp := do(t, "GET", srv.URL+"/gateway/docs", tok)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Fatal("the cut answer reached the client whole")
	}
	if got := log.String(); !strings.Contains(got, "component=relay") || !strings.Contains(got, "read error during body copy") {
		t.Fatalf("the relay's log:\n%s\nwant the proxy's read error, with component=relay", got)
	}
}

// TestHookEventsGoToTheRunner: a hook event is handed to the Runner for
// the Session its token names, exactly as sent, and never reaches the Hub;
// a restarted Runner's relay answers 503 until the Hub took the Session
// back, and one over the limit is refused.
func TestHookEventsGoToTheRunner(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r, hooks := newRelayHooks(t, hub.URL, "")
	tok := r.Issue("s1", netip.Addr{})
	if resp := do(t, "POST", srv.URL+"/mod/hook", tok); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("before the Hub took it back: %d, want 503", resp.StatusCode)
	}
	r.SetModToken("s1", "kndlm_secret")
	resp := do(t, "POST", srv.URL+"/mod/hook", tok)
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "{}" {
		t.Fatalf("answer %d %q, want 200 {}", resp.StatusCode, b)
	}
	if h := <-hooks; h.session != "s1" || h.body != "{}" {
		t.Fatalf("the Runner got %+v, want s1's event as sent", h)
	}
	req, _ := http.NewRequest("POST", srv.URL+"/mod/hook", strings.NewReader(strings.Repeat("x", MaxHookBytes+1)))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("an oversized event: %v, want 413", err)
	}
	resp.Body.Close() // else the Transport's reader outlives the test
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized event: %s, want 413", resp.Status)
	}
	select {
	case s := <-got:
		t.Fatalf("the Hub saw %+v", s)
	case h := <-hooks:
		t.Fatalf("the Runner got an oversized event of %d bytes", len(h.body))
	default:
	}
}

func TestRefusals(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	old := r.Issue("s1", netip.Addr{})
	cur := r.Issue("s1", netip.Addr{}) // a new run revokes the old token
	r.SetModToken("s1", "kndlm_x")
	gone := r.Issue("s2", netip.Addr{})
	r.Revoke("s2")
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/mod/hook", "", 401},
		{"wrong token", "/mod/hook", "kndls_nope", 401},
		{"previous run's token", "/mod/hook", old, 401},
		{"revoked token", "/mod/hook", gone, 401},
		{"mod token itself", "/mod/hook", "kndlm_x", 401},
		{"anything else", "/api/sessions", cur, 404},
		{"no Creator's token held", "/model/" + cur + "/v1/messages", cur, 404},
		{"root", "/", cur, 404},
	}
	for _, tt := range tests {
		if resp := do(t, "POST", srv.URL+tt.path, tt.token); resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused request reached the hub: %+v", s)
	default:
	}
}

func TestAdoptedTokenWaitsForModToken(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, "")
	r.Adopt("s1", "kndls_readback", netip.Addr{})
	if resp := do(t, "POST", srv.URL+"/mod/hook", "kndls_readback"); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("before the mod token: status %d, want 503 with Retry-After", resp.StatusCode)
	}
	r.SetModToken("s1", "kndlm_new")
	if resp := do(t, "POST", srv.URL+"/mod/hook", "kndls_readback"); resp.StatusCode != 200 {
		t.Fatalf("after the mod token: status %d, want 200", resp.StatusCode)
	}
}

// TestTheModelRouteStreamsToTheModelEndpointUnderItsPath: a model call
// reaches the Runner's model endpoint under the endpoint's own path, with
// the Creator's token, each event of its answer passed on as it comes.
func TestTheModelRouteStreamsToTheModelEndpointUnderItsPath(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	model := upstreamServer(t, got)
	srv, r := newRelay(t, hub.URL, model.URL+"/base")
	tok, placeholder := r.Issue("s1", netip.Addr{}), Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	if resp := do(t, "POST", srv.URL+"/model/kndls_wrong/v1/messages", placeholder); resp.StatusCode != 401 {
		t.Fatalf("wrong session token on the model route: %d, want 401", resp.StatusCode)
	}
	start := time.Now()
	resp := doStream(t, srv.URL+"/model/"+tok+"/v1/messages?beta=true", placeholder)
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	if line != "data: one\n" || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("first event %q after %v: the stream was held back", line, time.Since(start))
	}
	s := <-got
	if s.path != "/base/v1/messages" || s.auth != "Bearer "+creatorToken {
		t.Fatalf("model endpoint saw %+v, want /base/v1/messages with the Creator's token", s)
	}
}

// doStream posts to url with bearer, asking for an event stream, which
// upstreamServer answers with two events 300 ms apart.
func doStream(t *testing.T, url, bearer string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+bearer)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// serve serves r with Serve on loopback, as the Runner does, and returns
// its address.
func serve(t *testing.T, r *Relay) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// from is a client whose connections come from ip, a loopback address
// standing in for a Sandbox's.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestASessionTokenIsTakenOnlyFromItsSandboxsAddress: a Session token
// issued for a Sandbox's address is refused from any other, on /mod/* and
// the model route alike, as if it were no token at all.
func TestASessionTokenIsTakenOnlyFromItsSandboxsAddress(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	model := upstreamServer(t, got)
	_, r := newRelay(t, hub.URL, model.URL)
	addr := serve(t, r)
	tok := r.Issue("s1", netip.MustParseAddr("127.0.0.2"))
	r.SetModToken("s1", "kndlm_secret")
	placeholder := Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	for _, route := range []struct{ path, bearer string }{{"/mod/other", tok}, {"/model/" + tok + "/v1/messages", placeholder}} {
		path := route.path
		for _, tt := range []struct {
			ip   string
			want int
		}{{"127.0.0.3", http.StatusUnauthorized}, {"127.0.0.1", http.StatusUnauthorized}, {"127.0.0.2", http.StatusOK}} {
			req, _ := http.NewRequest("POST", "http://"+addr+path, strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+route.bearer)
			resp, err := from(tt.ip).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s from %s: %d, want %d", path, tt.ip, resp.StatusCode, tt.want)
			}
		}
	}
	if n := len(got); n != 2 {
		t.Errorf("%d requests went upstream, want only the 2 from the Sandbox's address", n)
	}
}

// TestServeCapsConnectionsPerAddressAndClosesIdleOnes: one address holds
// at most its cap of connections (the next is closed as it comes, while
// another address is served), gets its place back when one closes; a
// connection idle after its answer is closed after the idle timeout, and
// one that never finishes its request after the read timeout. A model
// answer streaming for longer than either is not cut.
func TestServeCapsConnectionsPerAddressAndClosesIdleOnes(t *testing.T) {
	got := make(chan seen, 10)
	hub := upstreamServer(t, got)
	model := upstreamServer(t, got)
	_, r := newRelay(t, hub.URL, model.URL)
	r.maxConnsPerAddr, r.readTimeout, r.idleTimeout = 2, 100*time.Millisecond, 100*time.Millisecond
	addr := serve(t, r)

	// The model's stream pauses 300 ms between its two events.
	tok, placeholder := r.Issue("s1", netip.Addr{}), Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/model/"+tok+"/v1/messages", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+placeholder)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := from("127.0.0.4").Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != "data: one\n\ndata: two\n\n" {
		t.Fatalf("a model stream longer than the timeouts: %q %v, want both events", body, err)
	}

	held := []net.Conn{dialFrom(t, "127.0.0.1", addr), dialFrom(t, "127.0.0.1", addr)}
	slow := held[1]
	io.WriteString(slow, "POST /mod/hook HTTP/1.1\r\nHost: relay\r\nContent-Length: 100\r\n\r\n{")
	if !testenv.ClosedWithin(dialFrom(t, "127.0.0.1", addr), testenv.WaitShort) {
		t.Fatal("a third connection from one address was kept")
	}
	other := dialFrom(t, "127.0.0.2", addr)
	io.WriteString(other, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
	other.SetReadDeadline(time.Now().Add(testenv.WaitShort))
	if line, _ := bufio.NewReader(other).ReadString('\n'); !strings.HasPrefix(line, "HTTP/1.1 404") {
		t.Fatalf("another address while the first is full: %q, want an answer", line)
	}
	if !testenv.ClosedWithin(other, testenv.WaitShort) {
		t.Fatal("a connection idle after its answer was kept")
	}
	if !testenv.ClosedWithin(slow, testenv.WaitShort) {
		t.Fatal("a request whose body never came was kept")
	}
	testenv.Eventually(t, testenv.WaitShort, "a place given back once a connection closes", func() bool {
		c := dialFrom(t, "127.0.0.1", addr)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: relay\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(testenv.WaitShort))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		return strings.HasPrefix(line, "HTTP/1.1 404")
	})
}

// creatorToken is a Creator's setup token in these tests.
const creatorToken = "sk-ant-oat01-relay-test-creator-token-0123456789abcdefABCDEF"

// doModel posts a Messages request to the model route of session token tok
// with bearer as its credential.
func doModel(t *testing.T, srv, tok, bearer string) *http.Response {
	t.Helper()
	return doBody(t, "POST", srv+"/model/"+tok+"/v1/messages?beta=true", bearer, messagesBody)
}

// messagesBody is a streamed Messages request the fake Anthropic answers.
const messagesBody = `{"model":"claude-sonnet-5-5","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hello"}]}`

func TestTheModelRouteSwapsThePlaceholderForTheCreatorsTokenAndStreams(t *testing.T) {
	model := testkit.NewAnthropic(t, creatorToken)
	model.On(testkit.PromptContains("hello"), testkit.Text("hi from the model"))
	srv, r := newRelay(t, "http://127.0.0.1:9", model.URL)
	tok := r.Issue("s1", netip.Addr{})
	placeholder := Placeholder(creatorToken)
	if err := r.Hold("s1", creatorToken, placeholder); err != nil {
		t.Fatal(err)
	}
	resp := doModel(t, srv.URL, tok, placeholder)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"text":"hi from the "`) || !strings.Contains(string(b), "event: message_stop") {
		t.Fatalf("through the relay: %d %s, want the model's stream", resp.StatusCode, b)
	}
	// Sent to the model directly, the placeholder is an unknown token.
	resp = doModel(t, model.URL, tok, placeholder)
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 401 || !strings.Contains(string(b), "authentication_error") {
		t.Fatalf("the placeholder sent to the model directly: %d %s, want 401 authentication_error", resp.StatusCode, b)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || reqs[0].Header.Get("Authorization") != "Bearer "+creatorToken || reqs[0].Path != "/v1/messages" || reqs[0].RawQuery != "beta=true" {
		t.Fatalf("the model saw %+v, want the request with the Creator's token", reqs)
	}
}

func TestAPlaceholderHasTheTokensShapeAndNothingOfIt(t *testing.T) {
	a, b := Placeholder(creatorToken), Placeholder(creatorToken)
	if a == b || len(a) != len(creatorToken) || !strings.HasPrefix(a, "sk-ant-oat01-") {
		t.Fatalf("placeholders %q and %q: want two different ones of the token's length and prefix", a, b)
	}
	if rest := strings.TrimPrefix(creatorToken, "sk-ant-oat01-"); strings.Contains(a, rest[:8]) {
		t.Fatalf("placeholder %q holds part of the token", a)
	}
	if got := Placeholder("short"); len(got) < len("sk-ant-oat01-")+43 {
		t.Fatalf("placeholder of a short token %q: want at least 256 random bits", got)
	}
}

func TestModelRequestsAreRefusedWithoutALiveTokenAndTheirSessionsOwnPlaceholder(t *testing.T) {
	got := make(chan seen, 10)
	model := upstreamServer(t, got)
	srv, r := newRelay(t, "http://127.0.0.1:9", model.URL)
	hold := func(id string) (tok, placeholder string) {
		tok, placeholder = r.Issue(id, netip.Addr{}), Placeholder(creatorToken)
		if err := r.Hold(id, creatorToken, placeholder); err != nil {
			t.Fatal(err)
		}
		return tok, placeholder
	}
	oldTok, oldPlaceholder := hold("s1")
	tok, placeholder := hold("s1") // a new run: the old one's token and placeholder are gone
	_, otherPlaceholder := hold("s2")
	deadTok, deadPlaceholder := hold("s3")
	r.Revoke("s3") // the Session slept
	tests := []struct {
		name, tok, bearer string
		want              int
	}{
		{"another Session's placeholder", tok, otherPlaceholder, 403},
		{"the Creator's token itself", tok, creatorToken, 403},
		{"no credential", tok, "", 401},
		{"a dead Session token with its placeholder", deadTok, deadPlaceholder, 401},
		{"the previous run's token and placeholder", oldTok, oldPlaceholder, 401},
		{"the previous run's placeholder", tok, oldPlaceholder, 403},
		{"another Session's placeholder on no token", "kndls_nope", otherPlaceholder, 401},
	}
	for _, tt := range tests {
		if resp := doModel(t, srv.URL, tt.tok, tt.bearer); resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
	}
	// A request for another origin, as a proxy would take it, goes nowhere.
	for _, line := range []string{"POST http://evil.example/model/" + tok + "/v1/messages HTTP/1.1", "CONNECT evil.example:443 HTTP/1.1"} {
		c := dialFrom(t, "127.0.0.1", srv.Listener.Addr().String())
		fmt.Fprintf(c, "%s\r\nHost: evil.example\r\nAuthorization: Bearer %s\r\nContent-Length: 2\r\n\r\n{}", line, placeholder)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", line, resp.StatusCode)
		}
	}
	select {
	case s := <-got:
		t.Fatalf("a refused request reached the model: %+v", s)
	default:
	}
	if resp := doModel(t, srv.URL, tok, placeholder); resp.StatusCode != 200 {
		t.Fatalf("the run's own placeholder: status %d, want 200", resp.StatusCode)
	}
	if s := <-got; s.auth != "Bearer "+creatorToken {
		t.Fatalf("the model saw %+v, want the Creator's token", s)
	}
}

func TestAPlaceholderReadBackWaitsForTheCreatorsToken(t *testing.T) {
	got := make(chan seen, 10)
	model := upstreamServer(t, got)
	srv, r := newRelay(t, "http://127.0.0.1:9", model.URL)
	r.Adopt("s1", "kndls_readback", netip.Addr{})
	placeholder := Placeholder(creatorToken)
	r.Hold("s1", "", placeholder)
	if p, ok := r.Awaits("s1"); !ok || p != placeholder {
		t.Fatalf("Awaits: %q %v, want the placeholder", p, ok)
	}
	if resp := doModel(t, srv.URL, "kndls_readback", placeholder); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("before the token: status %d, want 503 with Retry-After", resp.StatusCode)
	}
	r.Hold("s1", creatorToken, placeholder)
	if _, ok := r.Awaits("s1"); ok {
		t.Fatal("Awaits after the token came: want false")
	}
	if resp := doModel(t, srv.URL, "kndls_readback", placeholder); resp.StatusCode != 200 {
		t.Fatalf("after the token: status %d, want 200", resp.StatusCode)
	}
	if s := <-got; s.auth != "Bearer "+creatorToken {
		t.Fatalf("the model saw %+v, want the Creator's token", s)
	}
}

func TestWithNoModelEndpointTheCreatorsTokenGoesOnlyToAnthropic(t *testing.T) {
	_, r := newRelay(t, "http://127.0.0.1:9", "")
	if r.model.String() != AnthropicAPI {
		t.Fatalf("model upstream %s, want %s", r.model, AnthropicAPI)
	}
}

// gitSeen is a Git that records which Session each request reached it for.
type gitSeen struct {
	mu   sync.Mutex
	seen []string
}

func (g *gitSeen) ServeGit(w http.ResponseWriter, req *http.Request, sessionID, rest string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, sessionID+" "+rest)
}

func (g *gitSeen) ServeAPI(w http.ResponseWriter, req *http.Request, sessionID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, sessionID+" api "+req.URL.Path)
}

// TestGhReachesTheAPIRouteOnlyWithALiveSessionToken: a request for
// gitrelay.APIHost, by its Host or in a proxy's absolute form, takes the
// Session token as gh sends one ("token …") and is handed on for that
// Session alone; without one, or with one revoked, it is 401 in GitHub's
// JSON shape; a request for another host in absolute form is still
// refused as no proxy's.
func TestGhReachesTheAPIRouteOnlyWithALiveSessionToken(t *testing.T) {
	g := &gitSeen{}
	r, err := New(Options{HubURL: "http://127.0.0.1:1", Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }, Git: g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	tok := r.Issue("s1", netip.Addr{})
	other := r.Issue("s2", netip.Addr{})
	r.Revoke("s2")
	proxied := &http.Client{Transport: &http.Transport{Proxy: func(*http.Request) (*url.URL, error) { return url.Parse(srv.URL) }}}
	tests := []struct {
		name   string
		host   string
		proxy  bool
		token  string
		status int
	}{
		{"by Host, the Session token", "api.github.localhost", false, tok, http.StatusOK},
		{"absolute, the Session token", "api.github.localhost", true, tok, http.StatusOK},
		{"none", "api.github.localhost", false, "", http.StatusUnauthorized},
		{"a revoked one", "api.github.localhost", true, other, http.StatusUnauthorized},
		{"another host, absolute", "api.github.com", true, tok, http.StatusForbidden},
	}
	for _, tt := range tests {
		c, target := http.DefaultClient, srv.URL+"/repos/acme/app"
		if tt.proxy {
			c, target = proxied, "http://"+tt.host+"/repos/acme/app"
		}
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Host = tt.host
		if tt.token != "" {
			req.Header.Set("Authorization", "token "+tt.token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status || (tt.status == http.StatusUnauthorized && resp.Header.Get("Content-Type") != "application/json; charset=utf-8") {
			t.Errorf("%s: got %d %q, want %d", tt.name, resp.StatusCode, resp.Header.Get("Content-Type"), tt.status)
		}
	}
	if want := []string{"s1 api /repos/acme/app", "s1 api /repos/acme/app"}; !slices.Equal(g.seen, want) {
		t.Errorf("the API route got %v, want %v", g.seen, want)
	}
}

// TestGitReachesTheGitRelayOnlyWithALiveSessionToken: /git/* takes the
// Session token as Basic auth's password, as git's credential helper gives
// it, and hands the request on for that Session alone; without one, or
// with one revoked, it asks git for a credential (401 naming Basic) and
// hands nothing on.
func TestGitReachesTheGitRelayOnlyWithALiveSessionToken(t *testing.T) {
	g := &gitSeen{}
	r, err := New(Options{HubURL: "http://127.0.0.1:1", Hook: func(context.Context, string, []byte) ([]byte, error) { return nil, nil }, Git: g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	tok := r.Issue("s1", netip.Addr{})
	other := r.Issue("s2", netip.Addr{})
	r.Revoke("s2")
	tests := []struct {
		name   string
		token  string
		status int
	}{{"the Session token", tok, http.StatusOK}, {"none", "", http.StatusUnauthorized}, {"a revoked one", other, http.StatusUnauthorized}, {"another", "x" + tok, http.StatusUnauthorized}}
	for _, tt := range tests {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/git/acme/app.git/info/refs?service=git-upload-pack", nil)
		if tt.token != "" {
			req.SetBasicAuth("kndl", tt.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.status || (tt.status == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic")) {
			t.Errorf("%s: got %d %q, want %d", tt.name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), tt.status)
		}
	}
	if want := []string{"s1 acme/app.git/info/refs"}; !slices.Equal(g.seen, want) {
		t.Errorf("the git relay got %v, want %v", g.seen, want)
	}
}
