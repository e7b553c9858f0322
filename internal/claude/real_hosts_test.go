package claude_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/testkit"
)

// TestRealWithABaseURLOnlyTheModelIsCalled: with ANTHROPIC_BASE_URL set,
// as the relay's model route is, a Turn with Bash, /status and /usage make
// no request but POST /v1/messages there: no OAuth profile or usage call,
// no remote managed settings or organization policy, to no host. Every
// connection but the model's goes through a proxy that records what it is
// asked for and refuses it.
func TestRealWithABaseURLOnlyTheModelIsCalled(t *testing.T) {
	s := newSession(t)
	asked := recordingProxy(t)
	// Bun's fetch sends plain http through HTTPS_PROXY too: the fake
	// model on loopback is reached directly.
	s.Launch.Own = append(s.Launch.Own, "HTTPS_PROXY=http://"+asked.addr, "HTTP_PROXY=http://"+asked.addr, "NO_PROXY=127.0.0.1")
	s.API.On(testkit.PromptContains("reach the model only"), testkit.Bash("echo ran"))
	s.API.On(testkit.AfterToolResult(), testkit.Text("Only the model."))
	s.Start(false)
	s.Send("reach the model only")
	s.waitReply(t, "Only the model.")
	for _, c := range []struct{ command, shows string }{
		{"/status", "not available with a custom ANTHROPIC_BASE_URL"},
		{"/usage", "No usage limits to show for this sign-in"},
	} {
		s.Send(c.command)
		testenv.Eventually(t, testenv.WaitShort, c.command+" showing "+c.shows, func() bool { return strings.Contains(s.Screen(), c.shows) })
		s.Keys("Escape")
		testenv.Eventually(t, testenv.WaitShort, c.command+" closed", func() bool { return !strings.Contains(s.Screen(), c.shows) })
	}
	if got := asked.list(); len(got) > 0 {
		t.Errorf("Claude Code asked the proxy for %q, want nothing but the model at its base URL", got)
	}
	s.checkOnlyMessages(t)
}

// proxyLog is a proxy on loopback that records each request's target and
// answers 403.
type proxyLog struct {
	addr string
	mu   sync.Mutex
	seen []string
}

func (p *proxyLog) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func recordingProxy(t *testing.T) *proxyLog {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxyLog{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				p.mu.Lock()
				p.seen = append(p.seen, req.Method+" "+req.Host+req.URL.Path)
				p.mu.Unlock()
				c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
			}()
		}
	}()
	return p
}
