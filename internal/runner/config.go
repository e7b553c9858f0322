package runner

import (
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/sandbox"
)

// DefaultArchiveKeep is how long an archived Session stays restorable
// when RUNNER_ARCHIVE_KEEP is not set: 30 days.
const DefaultArchiveKeep = 30 * 24 * time.Hour

// Config is a Runner's configuration. Each field names its environment
// variable and default; FromEnv reads them.
type Config struct {
	// HubURL is the Hub's URL. KNDL_HUB_URL, required.
	HubURL string
	// Token is this Runner's token. RUNNER_TOKEN, required.
	Token string
	// Name is how the Runner names itself in its hello. RUNNER_NAME,
	// default the host name.
	Name string
	// Home holds the Runner's state: images, Builds, Sandboxes, Claude
	// Code. RUNNER_HOME, default $KNDL_HOME/runner.
	Home string
	// RelayPort is the mod relay's port, as Sandboxes reach it.
	// RUNNER_RELAY_PORT, default 7391.
	RelayPort int
	// MaxCPUs and MaxMemoryMiB cap every Sandbox. RUNNER_SANDBOX_MAX_CPUS
	// (default: the host's CPUs) and RUNNER_SANDBOX_MAX_MEMORY_MIB (default:
	// three quarters of the host's memory).
	MaxCPUs      float64
	MaxMemoryMiB int
	// MaxDiskMiB limits what each Sandbox writes, its root filesystem's
	// own writes and its disks together, enforced with a sized disk image
	// where the host can (the start log says how, or why not).
	// RUNNER_SANDBOX_MAX_DISK_MIB, default 0: no limit, since a new
	// Sandbox for a new version then copies its disks in and out of the
	// image (docs/performance.md).
	MaxDiskMiB int
	// MaxSessions is how many Sessions run here at once; the Hub places
	// none beyond it. RUNNER_MAX_SESSIONS, default one per
	// SessionMemoryMiB of the host's memory.
	MaxSessions int
	// SandboxBackend is the sandbox backend asked for:
	// RUNNER_SANDBOX_BACKEND, "gvisor" or "crun"; empty picks gVisor where
	// runsc runs on this host, else crun.
	SandboxBackend string
	// Runsc is runsc's path for the gvisor backend. RUNNER_RUNSC, default
	// runsc on PATH.
	Runsc string
	// BuildBackend is where Builds run when Sessions run on gVisor:
	// RUNNER_BUILD_BACKEND, "crun" to make them on crun (a Build's package
	// manager pays gVisor's cost on every system call; docs/security.md
	// says what the boundary is then), or empty, the default, for the
	// Sessions' backend.
	BuildBackend string
	// Builds is the backend Builds run on, when not the Sessions': the
	// daemon makes it from BuildBackend. Nil: the Sessions' backend.
	Builds sandbox.Backend
	// KeepBuilds is how many Builds of each Repo to keep.
	// RUNNER_SANDBOX_KEEP_BUILDS, default 3.
	KeepBuilds int
	// ArchiveKeep is how long an archived Session's disks (Claude Code's
	// state, the package cache) and Workspace stay on this host before they
	// are deleted, after which it cannot be restored. RUNNER_ARCHIVE_KEEP, a
	// Go duration; default 720h (30 days).
	ArchiveKeep time.Duration
	// Image is the image Sessions' Sandboxes are built from, until a Repo's
	// Environment names its own. RUNNER_DEFAULT_IMAGE, default
	// docker.io/library/debian:bookworm.
	Image string
	// NPMRegistry is where Claude Code is downloaded from.
	// RUNNER_NPM_REGISTRY, default https://registry.npmjs.org/.
	NPMRegistry string
	// Claude is the Claude Code version and integrity hashes Sessions run;
	// the zero value is the pinned one (claude.Pinned). Only a candidate
	// pin's smoke test (scripts/smoke) sets another; no variable does.
	Claude claude.Pin
	// Models is the table of models the Runner offers in its hello; the
	// zero value is the pinned one's (claude.Models). Only a candidate's
	// smoke test sets another, with Claude.
	Models claude.Table
	// ModelEndpoint, when set, sends every model request of Claude Code to
	// this URL instead of Anthropic, through the relay. It exists for tests
	// and self-hosted model gateways; off by default, and loud in the log
	// when on. RUNNER_MODEL_ENDPOINT.
	ModelEndpoint string
	// GitHubTokenRetry is how long the Runner waits to ask the Hub again for
	// a Session's Sandbox token when it had none (no GitHub App, or GitHub
	// failing). RUNNER_GITHUB_TOKEN_RETRY, a Go duration; default 5m.
	GitHubTokenRetry time.Duration
	// Outbound is how the Runner connects on someone's behalf: image
	// pulls and the host clone. It refuses what the Hub's own requests
	// refuse, except what its Allow opens: RUNNER_OUTBOUND_ALLOW, a
	// comma-separated list of CIDRs, addresses and host:port; default
	// none (kndl dev's: loopback).
	Outbound outbound.Dialer
	// RegistryAuth is which credentials image pulls use: "" (none) or
	// "host", root's Docker logins and credential helpers, which then let
	// anyone who may edit an Environment read any image they can.
	// RUNNER_REGISTRY_AUTH, default none.
	RegistryAuth string
	// WarmPool is how many Sandboxes the warm pool keeps ready per
	// Environment version used here in the last day, Claude Code at its
	// prompt, for new Sessions to take. RUNNER_WARM_POOL, default 1; 0
	// turns the pool off (the zero Config has it off).
	WarmPool int
	// RootOnly runs every Session's Claude Code as root, the Sandbox's
	// own, whatever user its Environment names (a devcontainer.json's
	// remoteUser or containerUser); the start log says so, naming the
	// property. RUNNER_ENVIRONMENT_USER=off; on, the default, runs it as
	// that user, which the Build checks the image has.
	RootOnly bool
	// Binary is the kndl binary mounted read-only into every Sandbox at
	// /opt/kndl/bin/kndl (the mod's hooks run it). Default: this
	// process's own executable.
	Binary string
	// PingEvery is how often the Runner pings the Hub, and how long it
	// waits for the pong before it drops the line and dials again. No
	// variable: only tests set it, to see a silent line in seconds; zero
	// is protocol.PingEvery (10 s).
	PingEvery time.Duration
	// Logger is the operator's log.
	Logger *slog.Logger
}

// RegistryAuthHost is RUNNER_REGISTRY_AUTH's one value.
const RegistryAuthHost = "host"

// FromEnv reads a Runner's configuration; home is $KNDL_HOME.
func FromEnv(getenv func(string) string, home string) (Config, error) {
	c := Config{
		HubURL: getenv("KNDL_HUB_URL"),
		Token:  getenv("RUNNER_TOKEN"),
		Name:   getenv("RUNNER_NAME"),
		Home:   getenv("RUNNER_HOME"),

		Image:         getenv("RUNNER_DEFAULT_IMAGE"),
		NPMRegistry:   getenv("RUNNER_NPM_REGISTRY"),
		ModelEndpoint: getenv("RUNNER_MODEL_ENDPOINT"),

		SandboxBackend: getenv("RUNNER_SANDBOX_BACKEND"),
		Runsc:          getenv("RUNNER_RUNSC"),
		BuildBackend:   getenv("RUNNER_BUILD_BACKEND"),
		RegistryAuth:   getenv("RUNNER_REGISTRY_AUTH"),
	}
	if c.RegistryAuth != "" && c.RegistryAuth != RegistryAuthHost {
		return c, fmt.Errorf("RUNNER_REGISTRY_AUTH=%q: want host (root's Docker logins) or leave it unset to pull with no credentials", c.RegistryAuth)
	}
	allow, err := outbound.ParseAllow(getenv("RUNNER_OUTBOUND_ALLOW"))
	if err != nil {
		return c, fmt.Errorf("RUNNER_OUTBOUND_ALLOW: %w", err)
	}
	c.Outbound = outbound.Dialer{Allow: allow, Setting: "RUNNER_OUTBOUND_ALLOW"}
	switch c.SandboxBackend {
	case "", "gvisor", "crun":
	default:
		return c, fmt.Errorf("RUNNER_SANDBOX_BACKEND=%q: want gvisor or crun, or leave it unset to use gVisor where runsc runs here", c.SandboxBackend)
	}
	if c.BuildBackend != "" && c.BuildBackend != "crun" {
		return c, fmt.Errorf("RUNNER_BUILD_BACKEND=%q: want crun (Builds on crun while Sessions run on gVisor) or leave it unset to build on the Sessions' backend", c.BuildBackend)
	}
	switch u := getenv("RUNNER_ENVIRONMENT_USER"); u {
	case "", "on":
	case "off":
		c.RootOnly = true
	default:
		return c, fmt.Errorf("RUNNER_ENVIRONMENT_USER=%q: want on (Claude Code runs as the user an Environment names) or off (always as root)", u)
	}
	if c.Image == "" {
		c.Image = "docker.io/library/debian:bookworm"
	}
	if c.Home == "" {
		c.Home = filepath.Join(home, "runner")
	}
	ints := []struct {
		env  string
		dst  *int
		def  int
		name string
	}{
		{"RUNNER_RELAY_PORT", &c.RelayPort, 7391, "a port number"},
		{"RUNNER_SANDBOX_MAX_MEMORY_MIB", &c.MaxMemoryMiB, 0, "a number of MiB"},
		{"RUNNER_SANDBOX_MAX_DISK_MIB", &c.MaxDiskMiB, 0, "a number of MiB"},
		{"RUNNER_SANDBOX_KEEP_BUILDS", &c.KeepBuilds, 3, "a count"},
		{"RUNNER_MAX_SESSIONS", &c.MaxSessions, 0, "a count"},
		{"RUNNER_WARM_POOL", &c.WarmPool, 1, "a count of Sandboxes per Environment version, 0 for none"},
	}
	for _, v := range ints {
		*v.dst = v.def
		if s := getenv(v.env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return c, fmt.Errorf("%s=%q: want %s", v.env, s, v.name)
			}
			*v.dst = n
		}
	}
	durations := []struct {
		env     string
		dst     *time.Duration
		example string
	}{
		{"RUNNER_ARCHIVE_KEEP", &c.ArchiveKeep, "720h or 90m"},
		{"RUNNER_GITHUB_TOKEN_RETRY", &c.GitHubTokenRetry, "5m or 30s"},
	}
	for _, v := range durations {
		if s := getenv(v.env); s != "" {
			d, err := time.ParseDuration(s)
			if err != nil || d <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive Go duration such as %s", v.env, s, v.example)
			}
			*v.dst = d
		}
	}
	if s := getenv("RUNNER_SANDBOX_MAX_CPUS"); s != "" {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 {
			return c, fmt.Errorf("RUNNER_SANDBOX_MAX_CPUS=%q: want a positive number such as 2 or 1.5", s)
		}
		c.MaxCPUs = f
	}
	return c, nil
}

// SessionMemoryMiB is the host memory RUNNER_MAX_SESSIONS's default
// allows each Session: an idle Claude Code with kndl's helpers in its
// Sandbox, with room to work.
const SessionMemoryMiB = 256

// maxSessions is MaxSessions, or its default on host.
func (c *Config) maxSessions(host sandbox.HostInfo) int {
	if c.MaxSessions > 0 {
		return c.MaxSessions
	}
	return max(1, host.MemoryMiB/SessionMemoryMiB)
}

func (c *Config) check() error {
	if c.HubURL == "" {
		return fmt.Errorf("KNDL_HUB_URL is not set: set it to the Hub's URL, such as https://kndl.example.com")
	}
	u, err := url.Parse(c.HubURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("KNDL_HUB_URL %q: want an http or https URL", c.HubURL)
	}
	if c.Token == "" {
		return fmt.Errorf("RUNNER_TOKEN is not set: pair this Runner on the Hub (kndl runner token create --name NAME) and set the token it shows")
	}
	if c.ModelEndpoint != "" {
		if u, err := url.Parse(c.ModelEndpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("RUNNER_MODEL_ENDPOINT %q: want an http or https URL", c.ModelEndpoint)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ArchiveKeep <= 0 {
		c.ArchiveKeep = DefaultArchiveKeep
	}
	if c.GitHubTokenRetry <= 0 {
		c.GitHubTokenRetry = DefaultGitHubTokenRetry
	}
	return nil
}

// models is the table the Runner offers: the pinned one's unless a
// candidate's smoke test set another.
func (c *Config) models() claude.Table {
	if len(c.Models.Models) == 0 {
		return claude.Models()
	}
	return c.Models
}
