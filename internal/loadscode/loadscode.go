// Package loadscode is the one table of variable names that change what
// code a tool loads or where it connects: the dynamic loader, the
// interpreters' start-up, the shell's, git's, the package managers'
// registries and config, TLS, proxies and name resolution, the pager. A
// Variable under one of these names reaches every Creator's Sessions in its
// Repo quietly, so the Hub refuses to set one unless a Member with push
// marks it (internal/hub, variables.go), and Claude Code's process never
// gets the rows marked KeptOut, whoever set them (internal/claude, KeptOut).
// docs/security.md lists the table; a test there checks the list against
// it. The Hub and internal/claude import it.
package loadscode

import (
	"slices"
	"strings"
)

// Rule is one row of the table.
type Rule struct {
	// Pattern is a whole name ("PAGER") or a prefix ending in *
	// ("LD_*"), matched without regard to case: npm and the proxies read
	// either, and a lower-case twin of the rest is as risky.
	Pattern string
	// Except are patterns the row leaves out (GIT_AUTHOR_* of GIT_*).
	Except []string
	// KeptOut says Claude Code's process never gets it, marked or not,
	// from a Variable or the image alike; the Start script still does.
	KeptOut bool
	// Why says what a value under the name can do.
	Why string
}

// Matches reports whether name falls under the rule.
func (r Rule) Matches(name string) bool {
	upper := strings.ToUpper(name)
	return match(r.Pattern, upper) && !slices.ContainsFunc(r.Except, func(p string) bool { return match(p, upper) })
}

func match(pattern, upper string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(upper, prefix)
	}
	return upper == pattern
}

// Match returns the row name falls under, and whether there is one.
func Match(name string) (Rule, bool) {
	for _, r := range Table {
		if r.Matches(name) {
			return r, true
		}
	}
	return Rule{}, false
}

// Table is every row, in the order docs/security.md lists them.
var Table = []Rule{
	// Sign Claude Code in some other way, or report elsewhere: kndl sets
	// its own on top.
	{Pattern: "ANTHROPIC_*", KeptOut: true, Why: "signs Claude Code in with another account, or sends its model calls to another endpoint"},
	{Pattern: "CLAUDE_*", KeptOut: true, Why: "Claude Code's own settings: its token, its config directory, what it runs"},
	{Pattern: "OTEL_*", KeptOut: true, Why: "sends telemetry of what Claude does to a collector elsewhere"},

	// The loader and the runtimes.
	{Pattern: "LD_*", KeptOut: true, Why: "the dynamic loader: LD_PRELOAD and LD_LIBRARY_PATH load a library into every program"},
	{Pattern: "GLIBC_TUNABLES", KeptOut: true, Why: "glibc's tunables, read by every program as it starts"},
	{Pattern: "GCONV_PATH", KeptOut: true, Why: "where glibc loads character-set modules from"},
	{Pattern: "NODE_*", KeptOut: true, Why: "Node's options (--require loads a file into every node), module path and trusted CAs"},
	{Pattern: "BUN_*", KeptOut: true, Why: "Bun's options and install settings; Claude Code runs on Bun"},
	{Pattern: "PYTHONPATH", KeptOut: true, Why: "where Python imports modules from first"},
	{Pattern: "PYTHONHOME", KeptOut: true, Why: "which Python standard library is loaded"},
	{Pattern: "PYTHONSTARTUP", KeptOut: true, Why: "a file Python runs as it starts"},
	{Pattern: "PYTHONUSERBASE", KeptOut: true, Why: "a site-packages Python imports from"},
	{Pattern: "PYTHONBREAKPOINT", KeptOut: true, Why: "what breakpoint() imports and calls"},
	{Pattern: "PERL5LIB", KeptOut: true, Why: "where Perl loads modules from"},
	{Pattern: "PERLLIB", KeptOut: true, Why: "where Perl loads modules from"},
	{Pattern: "PERL5OPT", KeptOut: true, Why: "options, -M modules among them, every perl runs with"},
	{Pattern: "RUBYLIB", KeptOut: true, Why: "where Ruby loads libraries from"},
	{Pattern: "RUBYOPT", KeptOut: true, Why: "options, -r libraries among them, every ruby runs with"},
	{Pattern: "JAVA_TOOL_OPTIONS", KeptOut: true, Why: "options, -javaagent among them, every JVM runs with"},
	{Pattern: "_JAVA_OPTIONS", KeptOut: true, Why: "options every JVM runs with"},
	{Pattern: "JDK_JAVA_OPTIONS", KeptOut: true, Why: "options the java launcher runs with"},

	// The shell's start-up.
	{Pattern: "BASH_ENV", KeptOut: true, Why: "a file every non-interactive bash runs first"},
	{Pattern: "ENV", KeptOut: true, Why: "a file sh and an interactive shell run first"},
	{Pattern: "SHELLOPTS", KeptOut: true, Why: "shell options every bash starts with (xtrace with PS4 runs a command)"},
	{Pattern: "BASHOPTS", KeptOut: true, Why: "shell options every bash starts with"},
	{Pattern: "PS4", KeptOut: true, Why: "expanded, command substitutions and all, before each traced command"},
	{Pattern: "PROMPT_COMMAND", KeptOut: true, Why: "a command run before each prompt"},

	// git and ssh.
	{Pattern: "GIT_*", Except: []string{"GIT_AUTHOR_*", "GIT_COMMITTER_*"}, KeptOut: true,
		Why: "git's config, ssh command, helpers, templates, exec path, pager and TLS; who commits passes"},
	{Pattern: "SSH_ASKPASS", KeptOut: true, Why: "a program ssh runs to ask for a passphrase"},
	{Pattern: "XDG_CONFIG_HOME", KeptOut: true, Why: "where git, pip, uv and most tools read their config files from"},

	// Package managers: where code is fetched from and what runs around a build.
	{Pattern: "NPM_CONFIG_*", KeptOut: true, Why: "npm's registry, its scripts' shell and node options"},
	{Pattern: "YARN_*", Why: "yarn's registry, its rc file and the plugins it loads"},
	{Pattern: "PIP_*", Why: "pip's index and extra indexes, trusted hosts and config file: where pip install fetches code"},
	{Pattern: "UV_*", Why: "uv's index, Python downloads and config file: where uv fetches code"},
	{Pattern: "GOPROXY", Why: "where go fetches modules"},
	{Pattern: "GOFLAGS", Why: "flags every go command runs with (-toolexec runs a program around each compile)"},
	{Pattern: "GOSUMDB", Why: "the checksum database go trusts for modules"},
	{Pattern: "GONOSUMDB", Why: "modules go fetches without checking their sums"},
	{Pattern: "GONOSUMCHECK", Why: "modules go fetches without checking their sums"},
	{Pattern: "GOPRIVATE", Why: "modules go fetches directly and without checking their sums"},
	{Pattern: "GOINSECURE", Why: "modules go fetches over plain http"},
	{Pattern: "GOTOOLCHAIN", Why: "a Go toolchain go downloads and runs in its own place"},
	{Pattern: "GOENV", Why: "the file go reads all of these from"},
	{Pattern: "CARGO_*", Why: "cargo's home (its config.toml), registries, rustc wrapper and target runners"},
	{Pattern: "RUSTC_WRAPPER", Why: "a program cargo runs around every rustc"},
	{Pattern: "RUSTC_WORKSPACE_WRAPPER", Why: "a program cargo runs around rustc for the workspace's crates"},
	{Pattern: "RUSTC", Why: "the program cargo runs as rustc"},
	{Pattern: "BUNDLE_*", Why: "Bundler's gem sources, mirrors and the Gemfile it loads"},

	// TLS, the network and name resolution.
	{Pattern: "SSL_*", KeptOut: true, Why: "the CAs TLS trusts (SSL_CERT_FILE, SSL_CERT_DIR)"},
	{Pattern: "OPENSSL_*", KeptOut: true, Why: "OpenSSL's config, which loads engines and providers"},
	{Pattern: "REQUESTS_CA_BUNDLE", KeptOut: true, Why: "the CAs Python's requests trusts"},
	{Pattern: "CURL_CA_BUNDLE", KeptOut: true, Why: "the CAs curl trusts"},
	{Pattern: "CURL_HOME", KeptOut: true, Why: "where curl reads its .curlrc (a proxy, a CA, options)"},
	{Pattern: "WGETRC", KeptOut: true, Why: "wget's config file (a proxy, a CA, options)"},
	{Pattern: "HTTP_PROXY", KeptOut: true, Why: "a proxy that sees every request, tokens in them"},
	{Pattern: "HTTPS_PROXY", KeptOut: true, Why: "a proxy that sees where every connection goes"},
	{Pattern: "ALL_PROXY", KeptOut: true, Why: "a proxy for every protocol"},
	{Pattern: "NO_PROXY", KeptOut: true, Why: "which hosts go around the proxy"},
	{Pattern: "FTP_PROXY", KeptOut: true, Why: "a proxy for ftp"},
	{Pattern: "HOSTALIASES", KeptOut: true, Why: "a file that renames hosts before they are resolved"},
	{Pattern: "RES_OPTIONS", KeptOut: true, Why: "the resolver's options"},
	{Pattern: "LOCALDOMAIN", KeptOut: true, Why: "the domains a short host name is searched in"},

	// The pager.
	{Pattern: "PAGER", KeptOut: true, Why: "a command git, man and others run to show their output"},
	{Pattern: "MANPAGER", KeptOut: true, Why: "a command man runs to show a page"},
	{Pattern: "LESSOPEN", KeptOut: true, Why: "a command less runs on each file it opens"},
	{Pattern: "LESSCLOSE", KeptOut: true, Why: "a command less runs on each file it closes"},
}
