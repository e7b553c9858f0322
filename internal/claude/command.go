package claude

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/loadscode"
)

// Launch is one start of a Session's Claude Code: what goes on its command
// line and into its environment ("What a Runner gives Claude Code").
type Launch struct {
	// Binary is the claude executable as the process sees it; default
	// MountDir/claude.
	Binary string
	// Conversation is Claude Code's session UUID: --session-id for a new
	// Session, or, with Resume, --resume to wake one.
	Conversation string
	Resume       bool
	// PluginDirs each become a --plugin-dir, in order.
	PluginDirs []string
	// Model and Effort, when set, become --model and --effort.
	Model, Effort string

	// Base is the environment underneath, as KEY=VALUE: what the Start
	// script gets (the image's login environment with the Environment's
	// Variables over it). The variables that would sign Claude Code in some
	// other way, send it elsewhere or change what it loads (KeptOut) are
	// removed from it.
	Base []string
	// Own is what the Runner itself sets in the Sandbox (the package
	// caches, the editor), as KEY=VALUE: over Base, and never kept out.
	Own []string
	// SessionID is the kndl Session's id, KNDL_SESSION_ID.
	SessionID string
	// ConfigDir is CLAUDE_CONFIG_DIR as the process sees it; default
	// ConfigDir.
	ConfigDir string
	// TZ is the Runner's time zone; empty keeps Base's.
	TZ string
	// RelayURL is the mod relay as the Sandbox reaches it, KNDL_URL.
	RelayURL string
	// SessionToken is the Session token the mod holds, KNDL_MOD_TOKEN.
	SessionToken string
	// OAuthToken is CLAUDE_CODE_OAUTH_TOKEN: the placeholder the Runner's
	// relay swaps for the Creator's setup token (HUB_CLAUDE_TOKEN=relay),
	// or the token itself (sandbox). Claude Code never starts without it.
	OAuthToken string
	// BashEnv, when set, is a file holding BashEnvScript, as the process
	// sees it: Claude Code then runs with its JavaScript engine's optimizing
	// JIT off (jitOff), and sources the file ahead of each Bash command
	// (CLAUDE_ENV_FILE), so what the model runs has it on again.
	BashEnv string
	// ModelEndpoint, when set, becomes ANTHROPIC_BASE_URL: every model call
	// goes there instead of to Anthropic. It is the only way a base URL
	// reaches Claude Code (one in Base is removed): the Runner sets the
	// relay's model route, in both HUB_CLAUDE_TOKEN modes.
	ModelEndpoint string
}

// KeptOut reports whether a variable is kept out of Claude Code's process,
// and so out of everything Claude runs (the Start script still gets it):
// the rows of loadscode's table marked KeptOut. Two kinds are: those that
// would sign Claude Code in some other way than the Creator's token or send
// it elsewhere (ANTHROPIC_*, CLAUDE_*: kndl sets its own on top), and those
// that change how Claude Code itself, or what it runs, loads code or reaches
// the network: the dynamic loader, Node, Bun and the other interpreters'
// start-up, the shell's, git's (but for who commits), npm's configuration,
// TLS, proxies, name resolution and the pager. A Variable any collaborator
// with push sets on a Repo must not be able to make the Creator's Claude
// Code trust another CA, load a library or go through a proxy, and so hand
// over the Creator's token.
func KeptOut(name string) bool {
	r, ok := loadscode.Match(name)
	return ok && r.KeptOut
}

// jitOff turns off the DFG tier of Bun's JavaScriptCore, and with it the
// FTL above it, in Claude Code's process. Claude Code is a large program
// whose start and Turns run much code a few times: compiling it with the
// optimizing tiers cost more CPU than it saved. Measured on 2.1.328
// (docs/performance.md, "What five Claude Codes spend"): from its start to
// its first tool's result up to a quarter less CPU, and less over
// eight Bash Turns after it too.
const jitOff = "BUN_JSC_useDFGJIT"

// BashEnvScript is what Launch.BashEnv holds: Bun reads jitOff as it starts,
// and a Bun program the model runs (a test suite, a build) should run with
// every tier, as it would on a laptop.
const BashEnvScript = "unset " + jitOff + "\n"

// Efforts are the values --effort takes; Claude Code warns about another
// and falls back to medium, so Command refuses it instead.
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

var (
	uuidRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	})
	modelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/\[\]-]*$`) })
	keyRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// Command returns the argv and the environment (KEY=VALUE, sorted) to start
// Claude Code with, or an ErrInvalid error naming the first bad field.
func (l Launch) Command() (argv, env []string, err error) {
	if err := l.check(); err != nil {
		return nil, nil, fmt.Errorf("claude code command: %w", err)
	}
	bin := l.Binary
	if bin == "" {
		bin = MountDir + "/claude"
	}
	argv = []string{bin}
	if l.Resume {
		argv = append(argv, "--resume", l.Conversation)
	} else {
		argv = append(argv, "--session-id", l.Conversation)
	}
	for _, d := range l.PluginDirs {
		argv = append(argv, "--plugin-dir", d)
	}
	argv = append(argv, "--dangerously-skip-permissions")
	if l.Model != "" {
		argv = append(argv, "--model", l.Model)
	}
	if l.Effort != "" {
		argv = append(argv, "--effort", l.Effort)
	}

	vars := map[string]string{}
	setAll(vars, l.Base)
	for k := range vars {
		if KeptOut(k) {
			delete(vars, k)
		}
	}
	setAll(vars, l.Own)
	configDir := l.ConfigDir
	if configDir == "" {
		configDir = ConfigDir
	}
	over := map[string]string{
		"KNDL_SESSION_ID":                          l.SessionID,
		"CLAUDE_CONFIG_DIR":                        configDir,
		"IS_SANDBOX":                               "1", // lets --dangerously-skip-permissions run as root
		"CLAUDE_CODE_DISABLE_AUTO_MEMORY":          "1",
		"CLAUDE_CODE_DISABLE_AGENT_VIEW":           "1",
		"DISABLE_INSTALLATION_CHECKS":              "1",
		"CLAUDE_CODE_OAUTH_TOKEN":                  l.OAuthToken,
		"KNDL_URL":                                 l.RelayURL,
		"KNDL_MOD_TOKEN":                           l.SessionToken,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		// Without it a fresh config dir fetches the official plugin
		// marketplace over DNS, https and ssh (notes/claude-code.md).
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
	}
	if l.TZ != "" {
		over["TZ"] = l.TZ
	}
	if l.ModelEndpoint != "" {
		over["ANTHROPIC_BASE_URL"] = l.ModelEndpoint
	}
	if l.BashEnv != "" {
		over[jitOff] = "0"
		over["CLAUDE_ENV_FILE"] = l.BashEnv
	}
	for k, v := range over {
		vars[k] = v
	}
	env = make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return argv, env, nil
}

// setAll sets each KEY=VALUE of kvs in vars, a later one over an earlier.
func setAll(vars map[string]string, kvs []string) {
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
}

func (l Launch) check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalid)...)
	}
	if !uuidRE().MatchString(l.Conversation) {
		return bad("conversation %q is not a lowercase UUID", l.Conversation)
	}
	for _, d := range l.PluginDirs {
		if !filepath.IsAbs(d) {
			return bad("plugin dir %q is not absolute", d)
		}
	}
	if l.BashEnv != "" && !filepath.IsAbs(l.BashEnv) {
		return bad("bash env file %q is not absolute", l.BashEnv)
	}
	if l.Model != "" && !modelRE().MatchString(l.Model) {
		return bad("model %q is not a model name", l.Model)
	}
	if l.Effort != "" && !slices.Contains(Efforts, l.Effort) {
		return bad("effort %q is not one of %s", l.Effort, strings.Join(Efforts, ", "))
	}
	for name, v := range map[string]string{"session id": l.SessionID, "relay URL": l.RelayURL,
		"session token": l.SessionToken, "OAuth token": l.OAuthToken} {
		if v == "" {
			return bad("no %s", name)
		}
	}
	if l.ModelEndpoint != "" {
		u, err := url.Parse(l.ModelEndpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return bad("model endpoint %q is not an http(s) URL without credentials", l.ModelEndpoint)
		}
	}
	for _, kv := range slices.Concat(l.Base, l.Own) {
		if k, _, ok := strings.Cut(kv, "="); !ok || !keyRE().MatchString(k) {
			return bad("base environment entry %q is not KEY=VALUE", kv)
		}
	}
	values := slices.Concat([]string{l.Binary, l.ConfigDir, l.TZ, l.Conversation, l.Model, l.Effort,
		l.SessionID, l.RelayURL, l.SessionToken, l.OAuthToken, l.ModelEndpoint, l.BashEnv}, l.PluginDirs, l.Base, l.Own)
	for _, v := range values {
		if strings.ContainsRune(v, 0) {
			return bad("a value holds a NUL byte")
		}
	}
	return nil
}

// LocalTimeZone is this machine's time zone name for TZ: $TZ if set, else
// the zone /etc/localtime links to, else UTC.
func LocalTimeZone() string {
	if tz := os.Getenv("TZ"); tz != "" {
		return strings.TrimPrefix(tz, ":")
	}
	return zoneOfLink("/etc/localtime")
}

func zoneOfLink(path string) string {
	target, err := os.Readlink(path)
	if err != nil {
		return "UTC"
	}
	if _, zone, ok := strings.Cut(target, "zoneinfo/"); ok && zone != "" {
		return zone
	}
	return "UTC"
}
