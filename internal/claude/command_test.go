package claude

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

const conv = "0b6e3f4a-8c1d-4e2f-9a7b-5c6d7e8f9a0b"

func launch(edit func(*Launch)) Launch {
	l := Launch{Conversation: conv, SessionID: "ses_1", RelayURL: "http://host.microsandbox.internal:7070",
		SessionToken: "session-token", OAuthToken: "oauth-token"}
	if edit != nil {
		edit(&l)
	}
	return l
}

func TestCommandArgs(t *testing.T) {
	tests := []struct {
		name string
		l    Launch
		want []string
	}{
		{"new session", launch(nil),
			[]string{"/opt/kndl/claude-code/claude", "--session-id", conv, "--dangerously-skip-permissions"}},
		{"wake", launch(func(l *Launch) { l.Resume = true }),
			[]string{"/opt/kndl/claude-code/claude", "--resume", conv, "--dangerously-skip-permissions"}},
		{"plugins, model and effort", launch(func(l *Launch) {
			l.Binary = "/usr/local/bin/claude"
			l.PluginDirs = []string{"/opt/kndl/mod/3/hub-link", "/opt/kndl/mod/3/hub-link-commands"}
			l.Model, l.Effort = "opus", "xhigh"
		}), []string{"/usr/local/bin/claude", "--session-id", conv,
			"--plugin-dir", "/opt/kndl/mod/3/hub-link", "--plugin-dir", "/opt/kndl/mod/3/hub-link-commands",
			"--dangerously-skip-permissions", "--model", "opus", "--effort", "xhigh"}},
		{"full model id", launch(func(l *Launch) { l.Model = "claude-opus-4-1[1m]" }),
			[]string{"/opt/kndl/claude-code/claude", "--session-id", conv, "--dangerously-skip-permissions", "--model", "claude-opus-4-1[1m]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := tt.l.Command()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	base := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/root", "TZ=America/New_York", "LANG=C.UTF-8",
		// The Environment's Variables may name ours: ours win.
		"KNDL_MOD_TOKEN=mine", "CLAUDE_CONFIG_DIR=/tmp/x", "IS_SANDBOX=0", "CLAUDE_CODE_OAUTH_TOKEN=someone-elses",
		// These would sign Claude Code in elsewhere: they never reach it.
		"ANTHROPIC_API_KEY=sk-ant-x", "ANTHROPIC_AUTH_TOKEN=t", "ANTHROPIC_BASE_URL=https://evil.example",
		"CLAUDE_CODE_OAUTH_REFRESH_TOKEN=r", "CLAUDE_CODE_USE_BEDROCK=1", "CLAUDE_CODE_USE_VERTEX=1", "CLAUDE_CODE_USE_FOUNDRY=1",
		// These would make it trust, load or go through something else.
		"HTTPS_PROXY=http://evil.example:3128", "https_proxy=http://evil.example:3128", "NODE_TLS_REJECT_UNAUTHORIZED=0",
		"NODE_EXTRA_CA_CERTS=/workspace/ca.pem", "NODE_OPTIONS=--require /workspace/x.js", "LD_PRELOAD=/workspace/x.so",
		"LD_LIBRARY_PATH=/workspace", "BASH_ENV=/workspace/rc", "ENV=/workspace/rc", "SSL_CERT_FILE=/workspace/ca.pem",
		"SSL_CERT_DIR=/workspace", "BUN_CONFIG_REGISTRY=http://evil.example", "OTEL_EXPORTER_OTLP_ENDPOINT=http://evil.example",
		// These would make git, npm, OpenSSL, the shell or an interpreter
		// run, load or connect to something else.
		"GIT_SSH_COMMAND=/workspace/x", "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.sshCommand", "GIT_CONFIG_VALUE_0=/workspace/x",
		"GIT_CONFIG_GLOBAL=/workspace/gitconfig", "GIT_EXEC_PATH=/workspace", "GIT_ASKPASS=/workspace/x", "GIT_TEMPLATE_DIR=/workspace",
		"OPENSSL_CONF=/workspace/openssl.cnf", "npm_config_registry=http://evil.example", "NPM_CONFIG_USERCONFIG=/workspace/npmrc",
		"SHELLOPTS=xtrace", "PS4=$(/workspace/x)", "PYTHONPATH=/workspace", "PERL5OPT=-M/workspace/x", "RUBYOPT=-r/workspace/x",
		"JAVA_TOOL_OPTIONS=-javaagent:/workspace/x.jar", "CURL_HOME=/workspace",
		"XDG_CONFIG_HOME=/workspace", "PAGER=/workspace/x", "LESSOPEN=|/workspace/x %s",
		// A package manager's registry a Member with push marked passes.
		"PIP_INDEX_URL=https://pypi.example.com/simple",
		"EMPTY=", "WITH_EQUALS=a=b", "NODE=plain", "MY_NODE_OPTIONS=kept",
		// Who commits passes.
		"GIT_AUTHOR_NAME=Team Bot", "GIT_COMMITTER_EMAIL=bot@example.com",
	}
	ours := []string{
		"CLAUDE_CODE_DISABLE_AGENT_VIEW=1",
		"CLAUDE_CODE_DISABLE_AUTO_MEMORY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"CLAUDE_CODE_OAUTH_TOKEN=oauth-token",
		"CLAUDE_CONFIG_DIR=/var/lib/kndl/claude",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_INSTALLATION_CHECKS=1",
		"IS_SANDBOX=1",
		"KNDL_MOD_TOKEN=session-token",
		"KNDL_SESSION_ID=ses_1",
		"KNDL_URL=http://host.microsandbox.internal:7070",
	}
	keep := []string{"EMPTY=", "HOME=/root", "LANG=C.UTF-8", "PATH=/usr/local/bin:/usr/bin:/bin", "WITH_EQUALS=a=b", "NODE=plain", "MY_NODE_OPTIONS=kept",
		"GIT_AUTHOR_NAME=Team Bot", "GIT_COMMITTER_EMAIL=bot@example.com", "PIP_INDEX_URL=https://pypi.example.com/simple"}
	sorted := func(parts ...[]string) []string {
		out := slices.Concat(parts...)
		slices.Sort(out)
		return out
	}
	tests := []struct {
		name string
		l    Launch
		want []string
	}{
		{"nothing underneath", launch(nil), ours},
		{"base under ours, sign-in variables out, base TZ kept", launch(func(l *Launch) { l.Base = base }),
			sorted(ours, keep, []string{"TZ=America/New_York"})},
		{"runner's TZ wins", launch(func(l *Launch) { l.Base, l.TZ = base, "Europe/Copenhagen" }),
			sorted(ours, keep, []string{"TZ=Europe/Copenhagen"})},
		{"model endpoint is the only base URL", launch(func(l *Launch) {
			l.Base, l.ModelEndpoint = base, "http://127.0.0.1:4000"
		}), sorted(ours, keep, []string{"TZ=America/New_York", "ANTHROPIC_BASE_URL=http://127.0.0.1:4000"})},
		{"config dir for a host run", launch(func(l *Launch) { l.ConfigDir = "/tmp/cfg" }),
			slices.Concat(ours[:5], []string{"CLAUDE_CONFIG_DIR=/tmp/cfg"}, ours[6:])},
		{"last of a duplicated base key", launch(func(l *Launch) { l.Base = []string{"A=1", "A=2"} }),
			sorted(ours, []string{"A=2"})},
		{"with a Bash env file, the optimizing JIT off and the file Claude Code sources", launch(func(l *Launch) {
			l.Base, l.BashEnv = []string{"BUN_JSC_useDFGJIT=1", "CLAUDE_ENV_FILE=/workspace/rc"}, "/opt/kndl/mod/3/bash-env"
		}), sorted(ours, []string{"BUN_JSC_useDFGJIT=0", "CLAUDE_ENV_FILE=/opt/kndl/mod/3/bash-env"})},
		{"the Runner's own over base, never kept out", launch(func(l *Launch) {
			l.Base = []string{"npm_config_cache=/workspace/npm", "XDG_CACHE_HOME=/workspace"}
			l.Own = []string{"npm_config_cache=/var/cache/kndl/npm", "BUN_INSTALL_CACHE_DIR=/var/cache/kndl/bun"}
		}), sorted(ours, []string{"BUN_INSTALL_CACHE_DIR=/var/cache/kndl/bun", "XDG_CACHE_HOME=/workspace", "npm_config_cache=/var/cache/kndl/npm"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := tt.l.Command()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCommandRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, want string
		edit       func(*Launch)
	}{
		{"no conversation", "not a lowercase UUID", func(l *Launch) { l.Conversation = "" }},
		{"conversation not a uuid", "not a lowercase UUID", func(l *Launch) { l.Conversation = "--help" }},
		{"relative plugin dir", "not absolute", func(l *Launch) { l.PluginDirs = []string{"mod/hub-link"} }},
		{"relative bash env file", "not absolute", func(l *Launch) { l.BashEnv = "mod/bash-env" }},
		{"model like a flag", "not a model name", func(l *Launch) { l.Model = "--dangerously" }},
		{"model with a space", "not a model name", func(l *Launch) { l.Model = "opus x" }},
		{"unknown effort", "not one of low, medium, high, xhigh, max", func(l *Launch) { l.Effort = "huge" }},
		{"no oauth token", "no OAuth token", func(l *Launch) { l.OAuthToken = "" }},
		{"no session id", "no session id", func(l *Launch) { l.SessionID = "" }},
		{"no relay", "no relay URL", func(l *Launch) { l.RelayURL = "" }},
		{"no session token", "no session token", func(l *Launch) { l.SessionToken = "" }},
		{"endpoint not http", "not an http(s) URL", func(l *Launch) { l.ModelEndpoint = "file:///etc/passwd" }},
		{"endpoint with credentials", "without credentials", func(l *Launch) { l.ModelEndpoint = "https://u:p@gw.example" }},
		{"base entry without =", "not KEY=VALUE", func(l *Launch) { l.Base = []string{"PATH"} }},
		{"base entry with empty key", "not KEY=VALUE", func(l *Launch) { l.Base = []string{"=x"} }},
		{"NUL in a value", "NUL", func(l *Launch) { l.Base = []string{"A=x\x00y"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv, env, err := launch(tt.edit).Command()
			if err == nil || !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an ErrInvalid saying %q", err, tt.want)
			}
			if argv != nil || env != nil {
				t.Errorf("got argv %q env %q with an error, want none", argv, env)
			}
		})
	}
}

func TestZoneOfLink(t *testing.T) {
	dir := t.TempDir()
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct{ path, want string }{
		{link("cph", "/usr/share/zoneinfo/Europe/Copenhagen"), "Europe/Copenhagen"},
		{link("rel", "../usr/share/zoneinfo/America/Argentina/Buenos_Aires"), "America/Argentina/Buenos_Aires"},
		{link("odd", "/somewhere/else"), "UTC"},
		{filepath.Join(dir, "missing"), "UTC"},
	}
	for _, tt := range tests {
		if got := zoneOfLink(tt.path); got != tt.want {
			t.Errorf("zoneOfLink(%s): got %q, want %q", tt.path, got, tt.want)
		}
	}
}
