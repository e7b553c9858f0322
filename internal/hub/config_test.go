package hub

import "testing"

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
