package hub

import (
	"strings"
	"testing"
)

func TestForwardURL(t *testing.T) {
	tests := []struct {
		public, forward, want string
		bad                   bool
	}{
		{public: "http://127.0.0.1:7380", want: "http://*.localhost:7380"},
		{public: "http://localhost", want: "http://*.localhost:80"},
		{public: "https://kndl.example.com", want: ""},
		{public: "https://kndl.example.com", forward: "https://*.ports.example.com/", want: "https://*.ports.example.com"},
		{public: "https://kndl.example.com", forward: "https://ports.example.com", bad: true},
		{public: "https://kndl.example.com", forward: "https://*.*.example.com", bad: true},
		{public: "https://kndl.example.com", forward: "ftp://*.example.com", bad: true},
		{public: "https://kndl.example.com", forward: "https://*.example.com/path", bad: true},
	}
	for _, tt := range tests {
		c := Config{Listen: "127.0.0.1:7380", PublicURL: tt.public, ForwardURL: tt.forward, SecretsKey: "x"}
		err := c.Check()
		if tt.bad {
			if err == nil {
				t.Errorf("%s: took it", tt.forward)
			}
			continue
		}
		if err != nil || c.ForwardURL != tt.want {
			t.Errorf("public %s forward %q: got %q %v, want %q", tt.public, tt.forward, c.ForwardURL, err, tt.want)
		}
	}
}

func TestForwardTarget(t *testing.T) {
	h := &Hub{cfg: Config{ForwardURL: "https://*.ports.example.com"}}
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	tests := []struct {
		host string
		port int
	}{
		{"p8000-" + id + ".ports.example.com", 8000},
		{"P8000-" + strings.ToUpper(id) + ".PORTS.example.com", 8000}, // host names are case-blind
		{"p8000-" + id + ".ports.example.com:443", 0},
		{"p08000-" + id + ".ports.example.com", 0},
		{"p70000-" + id + ".ports.example.com", 0},
		{"p8000-" + id + ".evil.ports.example.com", 0},
		{"x.p8000-" + id + ".ports.example.com", 0},
		{"p8000-" + id + "x.ports.example.com", 0},
		{"ports.example.com", 0},
		{"kndl.example.com", 0},
	}
	for _, tt := range tests {
		session, port, ok := h.forwardTarget(tt.host)
		if ok != (tt.port != 0) || port != tt.port || (ok && session != id) {
			t.Errorf("%s: got %s %d %v, want port %d", tt.host, session, port, ok, tt.port)
		}
	}
}
