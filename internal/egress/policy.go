// Package egress is what a Sandbox reaches beyond its Runner under an
// Environment's egress policy: the policy itself (open, or an allowlist of
// hosts, wildcard domains and named presets), the host name a connection
// is for (its TLS SNI or HTTP Host, read without terminating TLS), the
// Runner's proxy that passes a connection to an allowed host and refuses
// the rest, and the Runner's DNS server that answers allowed names only.
// The Sandbox backend sends a restricted Sandbox's TCP connections and DNS
// queries here at its network namespace's host end (internal/sandbox/oci).
// The Runner and internal/environment import it, and protocol for the
// policy's type.
package egress

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/errdefs"
)

// Modes of a Policy.
const (
	// ModeOpen is the spec's: a Sandbox reaches the internet, not the
	// private ranges. The zero Policy is open.
	ModeOpen = "open"
	// ModeAllowlist: a Sandbox reaches its relay and the hosts the
	// Policy lists, over HTTP and HTTPS (ports 80 and 443), and nothing
	// else.
	ModeAllowlist = "allowlist"
)

// Presets are the named host lists an allowlist can hold: the package
// registries and code hosts a Bootstrap or Start script and Claude's tools
// reach most.
var Presets = map[string][]string{
	"debian": {"deb.debian.org", "security.debian.org", "*.debian.org"},
	"npm":    {"registry.npmjs.org", "registry.yarnpkg.com", "*.npmjs.org"},
	"pypi":   {"pypi.org", "files.pythonhosted.org", "*.pythonhosted.org"},
	"go":     {"proxy.golang.org", "sum.golang.org", "go.dev", "golang.org", "dl.google.com"},
	// github: GitHub itself, its API and what it serves files and
	// archives from, for a Repo that downloads from GitHub; git and gh
	// need none of it, they go through the Runner's git relay.
	"github": {"github.com", "*.github.com", "*.githubusercontent.com"},
	"crates": {"crates.io", "*.crates.io", "static.rust-lang.org"},
	// docker: a pull from Docker Hub (dockerd in a Sandbox with Docker
	// on): the registry, its token service, and the hosts it redirects
	// blobs to, Docker's own R2 bucket by its full name, not all of R2.
	"docker": {"registry-1.docker.io", "auth.docker.io", "*.docker.io", "production.cloudflare.docker.com",
		"production.cloudfront.docker.com", "docker-images-prod.6aa30f8b08e16409b46e0173d6de2f56.r2.cloudflarestorage.com"},
}

// LeftOut is the one "-" entry a list may hold: "-github", from when the
// github preset was on by default. A list from then still passes, and the
// entry changes nothing: no preset is on unless the list names it.
const LeftOut = "-github"

// MaxAllow and MaxHost bound a Policy's list.
const (
	MaxAllow = 64
	MaxHost  = 253
)

// Policy is an Environment's egress setting, as the Hub keeps it and a
// Runner gets it in session.start.
type Policy struct {
	// Mode is ModeOpen (or empty) or ModeAllowlist.
	Mode string `json:"mode,omitempty"`
	// Allow, under ModeAllowlist, lists host names (registry.example.com),
	// wildcard domains (*.example.com: any name under example.com, not
	// example.com itself) and preset names (npm); nothing else is on.
	Allow []string `json:"allow,omitempty"`
}

// Restricted reports whether the Sandbox's egress is limited to the
// allowlist.
func (p Policy) Restricted() bool { return p.Mode == ModeAllowlist }

// Check refuses a Policy the Runner could not enforce, naming the entry.
func (p Policy) Check() error {
	switch p.Mode {
	case "", ModeOpen:
		if len(p.Allow) > 0 {
			return fmt.Errorf("egress allow %s lists hosts while egress is open: set egress to allowlist, or leave the list empty: %w", strings.Join(p.Allow, ", "), errdefs.ErrInvalid)
		}
		return nil
	case ModeAllowlist:
	default:
		return fmt.Errorf("egress %q: want open or allowlist: %w", p.Mode, errdefs.ErrInvalid)
	}
	if len(p.Allow) > MaxAllow {
		return fmt.Errorf("egress allow has %d entries; at most %d: %w", len(p.Allow), MaxAllow, errdefs.ErrInvalid)
	}
	for _, e := range p.Allow {
		if err := checkEntry(e); err != nil {
			return fmt.Errorf("egress allow %q %s: %w", e, err.Error(), errdefs.ErrInvalid)
		}
	}
	return nil
}

func checkEntry(e string) error {
	if strings.HasPrefix(e, "-") {
		if e != LeftOut {
			return fmt.Errorf("leaves out a preset, but none is on unless listed: drop the entry")
		}
		return nil
	}
	if _, ok := Presets[e]; ok {
		return nil
	}
	host, wild := strings.CutPrefix(e, "*.")
	if !strings.Contains(host, ".") {
		return fmt.Errorf("is neither a host name with a dot nor a preset (%s)", strings.Join(slices.Sorted(maps.Keys(Presets)), ", "))
	}
	if !validName(host) {
		what := "a host name"
		if wild {
			what = "a wildcard domain such as *.example.com"
		}
		return fmt.Errorf("is not %s: lowercase letters, digits, hyphens and dots, at most %d bytes", what, MaxHost)
	}
	return nil
}

// CheckHost refuses anything but one exact host name, as an allowlist
// entry takes it: no wildcard, no preset, no address. An Allow from the
// Session view adds only such a name.
func CheckHost(host string) error {
	if !strings.Contains(host, ".") || !validName(host) {
		return fmt.Errorf("%q is not a host name: lowercase letters, digits, hyphens and dots, with a dot, at most %d bytes: %w", host, MaxHost, errdefs.ErrInvalid)
	}
	return nil
}

// validName reports whether host is a DNS name: lowercase labels of
// letters, digits and inner hyphens, not an IPv4 address.
func validName(host string) bool {
	if host == "" || len(host) > MaxHost {
		return false
	}
	digits := true
	for label := range strings.SplitSeq(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			switch {
			case c >= 'a' && c <= 'z', c == '-':
				digits = false
			case c >= '0' && c <= '9':
			default:
				return false
			}
		}
	}
	return !digits
}

// Hosts is the allowlist with its presets expanded, sorted, each once;
// nil for an open Policy. No host is on every allowlist, GitHub's neither
// (git and gh go through the Runner's git relay): Claude Code's model calls go through the relay
// in both HUB_CLAUDE_TOKEN modes, so api.anthropic.com, where code in the
// Sandbox could send anything with a key of its own, is on one only if
// the list names it.
func (p Policy) Hosts() []string {
	if !p.Restricted() {
		return nil
	}
	out := []string{}
	for _, e := range p.Allow {
		switch {
		case strings.HasPrefix(e, "-"):
		case Presets[e] != nil:
			out = append(out, Presets[e]...)
		default:
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Matcher says whether a host name is on an allowlist.
type Matcher struct {
	exact map[string]bool
	// under are the domains of the wildcards, each with its leading dot.
	under []string
}

// Matcher returns p's Matcher; an open Policy's allows nothing (its
// Sandboxes reach hosts directly, not through the proxy).
func (p Policy) Matcher() Matcher {
	m := Matcher{exact: map[string]bool{}}
	for _, h := range p.Hosts() {
		if d, ok := strings.CutPrefix(h, "*"); ok {
			m.under = append(m.under, d)
		} else {
			m.exact[h] = true
		}
	}
	return m
}

// Allows reports whether host (any case, with or without the root's
// trailing dot) is on the list.
func (m Matcher) Allows(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if m.exact[host] {
		return true
	}
	return slices.ContainsFunc(m.under, func(d string) bool { return len(host) > len(d) && strings.HasSuffix(host, d) })
}
