package hub

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/hub/front"
	"kndl.dev/kndl/internal/hub/pulls"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/store"
)

// Config is the Hub's configuration. Each field names its environment
// variable and default; FromEnv reads them.
type Config struct {
	// Listen is the address to serve on. HUB_LISTEN, default 127.0.0.1:7380.
	Listen string
	// PublicURL is the URL people and Runners reach the Hub at; browser
	// requests that change anything must come from its origin.
	// HUB_PUBLIC_URL, default http://<Listen>.
	PublicURL string
	// DatabasePath is the SQLite file. HUB_DATABASE_PATH, default
	// $KNDL_HOME/hub.db.
	DatabasePath string
	// DatabaseURL, when set, is a PostgreSQL database the Hub keeps its
	// store in instead: postgres://user:password@host:port/database.
	// HUB_DATABASE_URL, default none (SQLite at DatabasePath).
	DatabaseURL string
	// SecretsKey seals stored secrets such as setup tokens, and keys the
	// audit log's chain (AuditKey): 32 random bytes as hex or base64.
	// HUB_SECRETS_KEY, required (kndl dev makes one).
	SecretsKey string
	// Logger is the operator's log; a Session's own output never goes here.
	Logger *slog.Logger
	// ForwardURL is where a Session's forwarded ports are served: a
	// wildcard address whose * becomes p<port>-<session id>, such as
	// https://*.kndl-ports.example.net, with DNS for it pointing at the Hub.
	// Each port gets an origin of its own, never the Hub's; put it on
	// another registrable domain than the Hub's, so a forwarded app is not
	// even same-site with it (cookies). HUB_FORWARD_URL;
	// default http://*.localhost:<port> for a Hub on loopback over HTTP
	// (browsers resolve *.localhost to loopback), else none: ports are
	// listed but not forwarded.
	ForwardURL string

	// GitHubURL is GitHub's web address, for sign-in. GITHUB_URL, default
	// https://github.com (a GitHub Enterprise Server's address works too).
	GitHubURL string
	// GitHubAPIURL is GitHub's REST API. GITHUB_API_URL, default
	// https://api.github.com for github.com, else GITHUB_URL/api/v3.
	GitHubAPIURL string
	// GitHubClientID and GitHubClientSecret are the GitHub App's OAuth
	// client; without them nobody signs in with GitHub.
	// GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET.
	GitHubClientID, GitHubClientSecret string
	// GitHubAppID and GitHubAppKey (the App's private key, PEM) let the Hub
	// ask, as the App's installation, who may access a Repo; without them a
	// GitHub sign-in has access to no Repo. GITHUB_APP_ID, and
	// GITHUB_APP_PRIVATE_KEY (the PEM) or GITHUB_APP_PRIVATE_KEY_FILE (a
	// path to it).
	GitHubAppID      int64
	GitHubAppKey     string
	GitHubAppKeyFile string
	// GitHubWebhookSecret is the App's webhook secret: a delivery to
	// POST /github/webhook is taken only with its signature under it.
	// GITHUB_WEBHOOK_SECRET, default none: the route refuses every
	// delivery, and nothing starts from GitHub.
	GitHubWebhookSecret string
	// RepoAccessTTL is how long GitHub's yes on Repo access is trusted
	// before asking again; a no is trusted for at most 30 s. Everyone
	// connected is checked again this often. HUB_REPO_ACCESS_TTL_MS,
	// default 300000 (5 minutes).
	RepoAccessTTL time.Duration
	// SigninMaxAge and SigninIdle bound a browser sign-in: from when it was
	// made, and from when it was last used. HUB_SIGNIN_MAX_AGE (default
	// 24h) and HUB_SIGNIN_IDLE (default 8h), as Go durations.
	SigninMaxAge, SigninIdle time.Duration
	// SudoMaxAge is how recent a browser sign-in must be for a privileged
	// act: storing a setup token, pairing or sharing a Runner, approving a
	// CLI login, inviting or removing Members (cloop's sudo mode). A CLI
	// token counts from the browser sign-in that approved it, so a stolen
	// cookie or CLI token does none of these for long. HUB_SUDO_MAX_AGE, a
	// Go duration, default 10m.
	SudoMaxAge time.Duration
	// SessionIdle is how long a Session with no Turn running and nothing
	// queued stays awake, unless its Creator turned Keep awake on.
	// HUB_SESSION_IDLE, a Go duration, default 30m.
	SessionIdle time.Duration
	// MemberMaxAwake is how many of one Member's Sessions may be awake at
	// once; a start or wake past it waits in the Member's line, its place
	// shown, until one of theirs sleeps or ends. HUB_MEMBER_MAX_AWAKE, a
	// whole number; unset, no limit: a Runner's capacity already bounds
	// what runs, and what a Member may spend is the team's choice.
	MemberMaxAwake int
	// MemberMaxSpend is what one Member's Sessions may spend in a day
	// (UTC), in US dollars as the price table estimates the relay's
	// counts; past it the relay refuses their model calls and they sleep,
	// saying so. HUB_MEMBER_MAX_SPEND, a positive number; unset, no cap.
	MemberMaxSpend float64
	// SandboxTokenGrace is how long a Session's previous Sandbox token
	// still works after a refresh, so a git command that read it just
	// before may finish; then the Hub revokes it at GitHub.
	// HUB_SANDBOX_TOKEN_GRACE, a Go duration, default 1m.
	SandboxTokenGrace time.Duration
	// PullsCheckGap is the least time between two questions to GitHub
	// about one pushed branch (pulls.Options.Gap).
	// HUB_PULLS_CHECK_GAP, a Go duration, default 1m.
	PullsCheckGap time.Duration
	// NotifyRetry is the wait before a failed notification's first retry,
	// doubled at each after, up to an hour (notify.Options.Retry).
	// HUB_NOTIFY_RETRY, a Go duration, default 30s.
	NotifyRetry time.Duration
	// SessionEventsMax bounds what one Session's Events cost the Hub's
	// store (each its row, 256 bytes, and its JSON), in all, and a
	// thirty-second of it in any minute; past it they are dropped, one
	// note saying how many. HUB_SESSION_EVENTS_MAX, default 1 GiB
	// (1073741824).
	SessionEventsMax int64
	// AttachmentMax bounds one file attached to a prompt, in bytes: a
	// bigger upload is refused with 413 and nothing is kept.
	// HUB_ATTACHMENT_MAX, default 20971520 (20 MiB).
	AttachmentMax int64
	// SessionAttachmentsMax bounds what one Session's Attachments hold
	// together, in bytes. HUB_SESSION_ATTACHMENTS_MAX, default 209715200
	// (200 MiB).
	SessionAttachmentsMax int64
	// RedactAllShapes makes Events pass every credential shape, not only
	// the Marked ones (a prefix such as xoxb- or ghp_): assignments to a
	// *_TOKEN or password, key and token headers, URL passwords, curl -u,
	// which misread more often. Logs, errors and notes always pass every
	// shape. HUB_REDACT_SHAPES: marked (the default) or all.
	RedactAllShapes bool
	// Outbound is how the Hub connects on someone's behalf: the Gateway's
	// requests to MCP servers, OAuth discovery, registration and tokens.
	// It refuses loopback, private, link-local (cloud metadata) and the
	// other ranges of outbound.RefusedV4 and RefusedV6, after DNS and on
	// every redirect, except what its Allow opens: HUB_OUTBOUND_ALLOW, a
	// comma-separated list of CIDRs, addresses and host:port; default
	// none (kndl dev's: loopback).
	Outbound outbound.Dialer
	// GatewayTimeout is how long an MCP server has to answer a Gateway
	// request (its status and headers). HUB_GATEWAY_TIMEOUT, a Go
	// duration, default 2m.
	GatewayTimeout time.Duration
	// ClaudeTokenInSandbox gives each Session's Claude Code the Creator's
	// setup token itself, where anything in the Sandbox can read it (the
	// spec's way). By default the Runner's relay holds it and Claude Code
	// gets a placeholder worth nothing elsewhere. HUB_CLAUDE_TOKEN: relay
	// (the default) or sandbox.
	ClaudeTokenInSandbox bool
	// DevLogin turns on dev login (kndl dev sets it): signing in as the dev
	// user, who has access to every Repo, with no GitHub. It answers only
	// while Listen is a loopback address, and only loopback callers.
	DevLogin bool
	// Front is how the Hub serves: HTTPS with a certificate from ACME
	// (HUB_TLS=auto) or the operator's files (HUB_TLS_CERT, HUB_TLS_KEY),
	// else plain HTTP on loopback alone unless HUB_INSECURE_HTTP=1
	// (front.Settings names each setting).
	Front front.Settings
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives
	// a request's address, for the limits on failures and the audit log.
	// HUB_TRUSTED_PROXIES, a comma-separated list of CIDRs, or none;
	// default loopback (127.0.0.0/8, ::1).
	TrustedProxies signin.Proxies
	// PingEvery is how often the Hub pings each Runner, and how long it
	// waits for the pong before it drops the connection and freezes the
	// Runner's Sessions. No variable: only tests set it, to see a silent
	// line in seconds; zero is protocol.PingEvery (10 s).
	PingEvery time.Duration

	envErr error // a malformed variable FromEnv read, reported by Check
}

// FromEnv reads the Hub's configuration; home is $KNDL_HOME.
func FromEnv(getenv func(string) string, home string) Config {
	c := Config{
		Listen:       getenv("HUB_LISTEN"),
		PublicURL:    getenv("HUB_PUBLIC_URL"),
		DatabasePath: getenv("HUB_DATABASE_PATH"),
		DatabaseURL:  getenv("HUB_DATABASE_URL"),
		SecretsKey:   getenv("HUB_SECRETS_KEY"),
		ForwardURL:   getenv("HUB_FORWARD_URL"),

		GitHubURL:          getenv("GITHUB_URL"),
		GitHubAPIURL:       getenv("GITHUB_API_URL"),
		GitHubClientID:     getenv("GITHUB_CLIENT_ID"),
		GitHubClientSecret: getenv("GITHUB_CLIENT_SECRET"),
		GitHubAppKey:       getenv("GITHUB_APP_PRIVATE_KEY"),
		GitHubAppKeyFile:   getenv("GITHUB_APP_PRIVATE_KEY_FILE"),

		GitHubWebhookSecret: getenv("GITHUB_WEBHOOK_SECRET"),
	}
	var errs []error
	num := func(name string, set func(int64)) {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Errorf("%s %q: want a positive whole number", name, v))
			}
			set(n)
		}
	}
	dur := func(name string, set func(time.Duration)) {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				errs = append(errs, fmt.Errorf("%s %q: want a duration such as 8h or 30m", name, v))
			}
			set(d)
		}
	}
	num("GITHUB_APP_ID", func(n int64) { c.GitHubAppID = n })
	num("HUB_REPO_ACCESS_TTL_MS", func(n int64) { c.RepoAccessTTL = time.Duration(n) * time.Millisecond })
	num("HUB_SESSION_EVENTS_MAX", func(n int64) { c.SessionEventsMax = n })
	num("HUB_MEMBER_MAX_AWAKE", func(n int64) { c.MemberMaxAwake = int(n) })
	if v := getenv("HUB_MEMBER_MAX_SPEND"); v != "" {
		usd, err := strconv.ParseFloat(v, 64)
		if err != nil || !(usd > 0) || math.IsInf(usd, 0) {
			errs = append(errs, fmt.Errorf("HUB_MEMBER_MAX_SPEND %q: want a positive number of US dollars a day, such as 20", v))
		}
		c.MemberMaxSpend = usd
	}
	dur("HUB_SIGNIN_MAX_AGE", func(d time.Duration) { c.SigninMaxAge = d })
	dur("HUB_SIGNIN_IDLE", func(d time.Duration) { c.SigninIdle = d })
	dur("HUB_SESSION_IDLE", func(d time.Duration) { c.SessionIdle = d })
	num("HUB_ATTACHMENT_MAX", func(n int64) { c.AttachmentMax = n })
	num("HUB_SESSION_ATTACHMENTS_MAX", func(n int64) { c.SessionAttachmentsMax = n })
	dur("HUB_SUDO_MAX_AGE", func(d time.Duration) { c.SudoMaxAge = d })
	dur("HUB_SANDBOX_TOKEN_GRACE", func(d time.Duration) { c.SandboxTokenGrace = d })
	dur("HUB_PULLS_CHECK_GAP", func(d time.Duration) { c.PullsCheckGap = d })
	dur("HUB_GATEWAY_TIMEOUT", func(d time.Duration) { c.GatewayTimeout = d })
	dur("HUB_NOTIFY_RETRY", func(d time.Duration) { c.NotifyRetry = d })
	c.Outbound.Setting = "HUB_OUTBOUND_ALLOW"
	if allow, err := outbound.ParseAllow(getenv("HUB_OUTBOUND_ALLOW")); err != nil {
		errs = append(errs, fmt.Errorf("HUB_OUTBOUND_ALLOW: %w", err))
	} else {
		c.Outbound.Allow = allow
	}
	switch v := getenv("HUB_CLAUDE_TOKEN"); v {
	case "", "relay":
	case "sandbox":
		c.ClaudeTokenInSandbox = true
	default:
		errs = append(errs, fmt.Errorf("HUB_CLAUDE_TOKEN %q: want relay (the Runner holds the Creator's token) or sandbox (Claude Code's process does)", v))
	}
	switch v := getenv("HUB_REDACT_SHAPES"); v {
	case "", "marked":
	case "all":
		c.RedactAllShapes = true
	default:
		errs = append(errs, fmt.Errorf("HUB_REDACT_SHAPES %q: want marked or all", v))
	}
	var err error
	if c.Front, err = front.FromEnv(getenv, home); err != nil {
		errs = append(errs, err)
	}
	if c.TrustedProxies, err = signin.ParseProxies(getenv("HUB_TRUSTED_PROXIES")); err != nil {
		errs = append(errs, fmt.Errorf("HUB_TRUSTED_PROXIES: %w", err))
	}
	c.envErr = errors.Join(errs...)
	if c.Listen == "" {
		c.Listen = "127.0.0.1:7380"
	}
	if c.DatabasePath == "" {
		c.DatabasePath = filepath.Join(home, "hub.db")
	}
	return c
}

// Database is where the Hub's store is, as store.Open takes it: the
// PostgreSQL URL if set, else the SQLite file.
func (c Config) Database() (string, error) {
	if c.DatabaseURL == "" {
		return c.DatabasePath, nil
	}
	if !store.IsPostgres(c.DatabaseURL) {
		// Not echoed: it may hold a password.
		return "", errors.New("HUB_DATABASE_URL: want a PostgreSQL URL, postgres://user:password@host:port/database (unset it to keep the store in SQLite at HUB_DATABASE_PATH)")
	}
	return c.DatabaseURL, nil
}

// Check fills in defaults that depend on other fields and validates the
// configuration.
func (c *Config) Check() error {
	if c.envErr != nil {
		return c.envErr
	}
	if c.PublicURL == "" {
		c.PublicURL = "http://" + c.Listen
		if c.Front.TLS() {
			c.PublicURL = "https://" + c.Listen
		}
	}
	u, err := url.Parse(c.PublicURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("HUB_PUBLIC_URL %q: want an http or https URL such as https://kndl.example.com", c.PublicURL)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("HUB_LISTEN %q: want host:port such as 127.0.0.1:7380", c.Listen)
	}
	if err := c.Front.Check(c.Listen, u); err != nil {
		return err
	}
	if c.TrustedProxies == nil {
		c.TrustedProxies = signin.Loopback
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.AttachmentMax == 0 {
		c.AttachmentMax = defaultAttachmentMax
	}
	if c.SessionAttachmentsMax == 0 {
		c.SessionAttachmentsMax = defaultSessionAttachmentsMax
	}
	if c.SudoMaxAge == 0 {
		c.SudoMaxAge = defaultSudoMaxAge
	}
	if c.SandboxTokenGrace == 0 {
		c.SandboxTokenGrace = time.Minute
	}
	if c.PullsCheckGap == 0 {
		c.PullsCheckGap = pulls.DefaultGap
	}
	if err := c.checkForward(u); err != nil {
		return err
	}
	return c.checkSignIn()
}

// checkForward fills in HUB_FORWARD_URL's default for a Hub on loopback and
// checks it: a wildcard first label, on a host other than the Hub's.
func (c *Config) checkForward(pub *url.URL) error {
	if c.ForwardURL == "" {
		if pub.Scheme == "http" && signin.IsLoopbackHost(pub.Hostname()) {
			port := pub.Port()
			if port == "" {
				port = "80"
			}
			c.ForwardURL = "http://*.localhost:" + port
		}
		return nil
	}
	u, err := url.Parse(c.ForwardURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.HasPrefix(u.Host, "*.") || len(u.Host) < 4 ||
		strings.Contains(u.Host[2:], "*") || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return fmt.Errorf("HUB_FORWARD_URL %q: want a wildcard address such as https://*.kndl-ports.example.net", c.ForwardURL)
	}
	c.ForwardURL = strings.TrimSuffix(c.ForwardURL, "/")
	return nil
}
