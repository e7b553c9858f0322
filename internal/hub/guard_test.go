package hub

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/testkit"
)

func TestSignInConfigFromEnv(t *testing.T) {
	tests := []struct {
		env     map[string]string
		wantErr string
		check   func(Config) bool
	}{
		{map[string]string{}, "", func(c Config) bool {
			return c.GitHubURL == "https://github.com" && c.GitHubAPIURL == "https://api.github.com" && c.RepoAccessTTL == 5*time.Minute &&
				c.SigninMaxAge == 24*time.Hour && c.SigninIdle == 8*time.Hour
		}},
		{map[string]string{"GITHUB_URL": "https://ghe.example.com"}, "", func(c Config) bool { return c.GitHubAPIURL == "https://ghe.example.com/api/v3" }},
		{map[string]string{"HUB_REPO_ACCESS_TTL_MS": "60000", "HUB_SIGNIN_IDLE": "30m"}, "", func(c Config) bool {
			return c.RepoAccessTTL == time.Minute && c.SigninIdle == 30*time.Minute
		}},
		{map[string]string{"HUB_REPO_ACCESS_TTL_MS": "5m"}, "HUB_REPO_ACCESS_TTL_MS", nil},
		{map[string]string{"HUB_SIGNIN_MAX_AGE": "-1h"}, "HUB_SIGNIN_MAX_AGE", nil},
		{map[string]string{"GITHUB_APP_ID": "x"}, "GITHUB_APP_ID", nil},
		{map[string]string{}, "", func(c Config) bool { return !c.RedactAllShapes }},
		{map[string]string{"HUB_REDACT_SHAPES": "all"}, "", func(c Config) bool { return c.RedactAllShapes }},
		{map[string]string{"HUB_REDACT_SHAPES": "every"}, "HUB_REDACT_SHAPES", nil},
		{map[string]string{}, "", func(c Config) bool { return !c.ClaudeTokenInSandbox }},
		{map[string]string{"HUB_CLAUDE_TOKEN": "sandbox"}, "", func(c Config) bool { return c.ClaudeTokenInSandbox }},
		{map[string]string{"HUB_CLAUDE_TOKEN": "vm"}, "HUB_CLAUDE_TOKEN", nil},
		{map[string]string{"GITHUB_CLIENT_ID": "Iv1.x"}, "GITHUB_CLIENT_SECRET", nil},
		{map[string]string{"GITHUB_APP_ID": "12"}, "private key", nil},
		{map[string]string{"GITHUB_APP_ID": "12", "GITHUB_APP_PRIVATE_KEY_FILE": "/nonexistent/key.pem"}, "GITHUB_APP_PRIVATE_KEY_FILE", nil},
	}
	for _, tt := range tests {
		c := FromEnv(func(k string) string { return tt.env[k] }, t.TempDir())
		err := c.Check()
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%v: err %v, want one naming %s", tt.env, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tt.env, err)
		case tt.check != nil && err == nil && !tt.check(c):
			t.Errorf("%v: config %+v", tt.env, c)
		}
	}
}

// TestAHubWithoutAGitHubAppSaysSoOnceAtStart: a Hub started with no GitHub
// App logs, once, what it lacks and the settings that add one; a Hub with
// one says nothing of it.
func TestAHubWithoutAGitHubAppSaysSoOnceAtStart(t *testing.T) {
	for _, tt := range []struct {
		name string
		app  bool
		want int
	}{{"no App", false, 1}, {"an App", true, 0}} {
		var log testkit.Buffer
		tune := []func(*Config){func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&log, nil)) }}
		if tt.app {
			tune = append(tune, withGitHub(testkit.NewGitHub(t), time.Minute))
		}
		newFixture(t, tune...)
		got := log.String()
		if n := strings.Count(got, "this Hub has no GitHub App"); n != tt.want {
			t.Errorf("%s: the start log says the Hub has no GitHub App %d times, want %d:\n%s", tt.name, n, tt.want, got)
		}
		if tt.want == 1 && (!strings.Contains(got, `level=WARN msg="this Hub has no GitHub App`) || !strings.Contains(got, "GITHUB_APP_ID")) {
			t.Errorf("%s: want a warning naming GITHUB_APP_ID, the start log is:\n%s", tt.name, got)
		}
	}
}
