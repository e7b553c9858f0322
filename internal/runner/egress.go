package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// A Session whose Environment sets egress to allowlist gets a restricted
// Sandbox (sandbox.Spec.RestrictEgress): its connections come to the
// Runner's egress proxy and its DNS queries to the Runner's DNS server,
// which judge them by the Session's allowlist, found by the Sandbox's
// address. Each refusal becomes a note in the Session's history,
// rate-limited.

// egressFile is the file of a Session's directory that keeps its
// Sandbox's egress policy, so a restarted Runner judges a running
// Sandbox's connections as before.
const egressFile = "egress.json"

// Block notes: at most blockBurst in a blockWindow per Session, and one
// per destination in the window; the rest are counted in the next note.
const (
	blockWindow = time.Minute
	blockBurst  = 10
)

// egressGate is the Runner's table of restricted Sandboxes.
type egressGate struct {
	mu sync.Mutex
	by map[netip.Addr]*restricted
}

// restricted is one restricted Sandbox: its Session, its allowlist, and
// the notes of its blocks.
type restricted struct {
	session string
	match   egress.Matcher

	since  time.Time
	noted  int
	seen   map[string]bool
	missed int
}

func envEgress(env *protocol.Environment) egress.Policy {
	if env == nil {
		return egress.Policy{}
	}
	return env.Egress
}

// set records that the Sandbox at addr runs Session id under p, and keeps
// p in the Session's directory; an open p forgets the address.
func (g *egressGate) set(dir, id string, addr netip.Addr, p egress.Policy) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by == nil {
		g.by = map[netip.Addr]*restricted{}
	}
	for a, r := range g.by {
		if r.session == id {
			delete(g.by, a)
		}
	}
	delete(g.by, addr)
	if !p.Restricted() {
		os.Remove(filepath.Join(dir, egressFile))
		return nil
	}
	g.by[addr] = &restricted{session: id, match: p.Matcher()}
	b, _ := json.Marshal(p)
	return writeAtomic(filepath.Join(dir, egressFile), b)
}

// swap has the Proxy and the DNS server judge Session id's restricted
// Sandbox by p from its next connection, and keeps p in the Session's
// directory for a Runner restart. Only an allowlist swaps for an
// allowlist: a switch between open and allowlist changes the Sandbox's
// network rules, which are set as it boots.
func (g *egressGate) swap(dir, id string, p egress.Policy) error {
	if !p.Restricted() {
		return fmt.Errorf("egress open applies to the Session's Sandbox at its next wake, not now: %w", errdefs.ErrConflict)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.by {
		if r.session == id {
			r.match = p.Matcher()
			b, _ := json.Marshal(p)
			return writeAtomic(filepath.Join(dir, egressFile), b)
		}
	}
	return fmt.Errorf("session %s has no Sandbox running here under an allowlist (it is asleep, or its egress is open): an allowlist applies at its next wake: %w", id, errdefs.ErrConflict)
}

// adopt takes back a running Sandbox's policy after a Runner restart.
func (g *egressGate) adopt(dir, id string, addr netip.Addr) error {
	b, err := os.ReadFile(filepath.Join(dir, egressFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	var p egress.Policy
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return fmt.Errorf("the Session's egress policy: %w", err)
	}
	return g.set(dir, id, addr, p)
}

// forget drops Session id's Sandbox.
func (g *egressGate) forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for a, r := range g.by {
		if r.session == id {
			delete(g.by, a)
		}
	}
}

// policy is the Proxy's and the DNS server's lookup.
func (g *egressGate) policy(src netip.Addr) (egress.Matcher, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.by[src]
	if !ok {
		return egress.Matcher{}, false
	}
	return r.match, true
}

// note returns the Session and the text of the note a block makes, or ""
// when the rate limit keeps it.
func (g *egressGate) note(src netip.Addr, dest, why string, now time.Time) (session, text string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.by[src]
	if !ok {
		return "", ""
	}
	if now.Sub(r.since) >= blockWindow {
		r.since, r.noted, r.seen = now, 0, map[string]bool{}
	}
	if r.noted >= blockBurst || r.seen[dest] {
		r.missed++
		return "", ""
	}
	r.noted++
	r.seen[dest] = true
	text = fmt.Sprintf("blocked: %s (%s)", dest, why)
	if r.missed > 0 {
		text += fmt.Sprintf("; %d more blocks since were not noted", r.missed)
		r.missed = 0
	}
	return r.session, text
}

// judgeEgress has the proxy and the DNS server judge the Session's
// Sandbox by the policy it booted with: the Environment's when it just
// booted (before dockerd and the Start script, which it holds to), the one
// kept when it was running already.
func (r *Runner) judgeEgress(ctx context.Context, s *session, dir string, env *protocol.Environment, booted bool) error {
	st, err := r.backend.Status(ctx, s.sandbox)
	if err != nil {
		return err
	}
	if booted {
		return r.egress.set(dir, s.id, st.Addr, envEgress(env))
	}
	return r.egress.adopt(dir, s.id, st.Addr)
}

// swapEgress is session.egress: an awake Session's allowlist changed.
func (r *Runner) swapEgress(req protocol.SessionEgress) error {
	if err := req.Egress.Check(); err != nil {
		return err
	}
	if err := r.egress.swap(r.sessionDir(req.SessionID), req.SessionID, req.Egress); err != nil {
		return err
	}
	r.log.Info("egress allowlist swapped", "session", req.SessionID, "hosts", len(req.Egress.Hosts()))
	return nil
}

// blocked reports a refused connection or name in its Session's history;
// host, the name off the allowlist when that is why, goes with the note
// as its Blocked (an Allow in the Session view adds it) when it is one
// exact host name.
func (r *Runner) blocked(src netip.Addr, dest, why, host string) {
	id, text := r.egress.note(src, dest, why, time.Now())
	if id == "" {
		return
	}
	r.log.Info("egress blocked", "session", id, "dest", dest, "why", why)
	ev := protocol.Event{At: time.Now(), Kind: protocol.EventNote, Text: text}
	if host = strings.TrimSuffix(strings.ToLower(host), "."); egress.CheckHost(host) == nil {
		ev.Blocked = host
	}
	r.notify(id, protocol.TypeSessionEvents, protocol.SessionEvents{SessionID: id, Events: []protocol.Event{ev}})
}

// serveEgress listens where the backend sends restricted Sandboxes and
// serves the proxy and the DNS server until ctx ends. A backend that
// restricts none gives no addresses.
func (r *Runner) serveEgress(ctx context.Context) error {
	h := r.backend.Host()
	if h.EgressProxy == "" {
		return nil
	}
	proxy := &egress.Proxy{Policy: r.egress.policy, Dial: r.cfg.Outbound.DialContext, Blocked: r.blocked, Log: r.log}
	dns := &egress.DNS{Policy: r.egress.policy, Log: r.log,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return r.cfg.Outbound.Resolve(ctx, "tcp4", host, 443)
		},
		Blocked: func(src netip.Addr, name string) {
			r.blocked(src, name, "a DNS lookup of a name off the Environment's egress allowlist; kndl env edit --allow adds it", name)
		}}
	pl, err := net.Listen("tcp", h.EgressProxy)
	if err != nil {
		return fmt.Errorf("the egress proxy cannot listen on %s: %w (is another Runner on this host using RUNNER_RELAY_PORT+1?)", h.EgressProxy, err)
	}
	dl, err := net.Listen("tcp", h.EgressDNS)
	if err != nil {
		pl.Close()
		return fmt.Errorf("the egress DNS server cannot listen on %s: %w", h.EgressDNS, err)
	}
	du, err := net.ListenPacket("udp", h.EgressDNS)
	if err != nil {
		pl.Close()
		dl.Close()
		return fmt.Errorf("the egress DNS server cannot listen on %s: %w", h.EgressDNS, err)
	}
	context.AfterFunc(ctx, func() { pl.Close(); dl.Close(); du.Close() })
	r.spawn(func() { proxy.Serve(ctx, pl) })
	r.spawn(func() { dns.ServeTCP(ctx, dl) })
	r.spawn(func() { dns.ServeUDP(ctx, du) })
	return nil
}
