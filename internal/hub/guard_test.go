package hub

import (
	"strings"
	"testing"
	"time"
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
