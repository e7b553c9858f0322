package hub

import (
	"context"
	"errors"
	"sync"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/store"
)

// conn is one request a person made, tracked while it runs: a WebSocket or
// stream stays open for hours on a credential checked once, so whatever ends
// the credential or the person's access ends it too, by cancelling its
// context.
type conn struct {
	user   store.User
	kind   auth.Kind // Cookie or CLI
	hash   string    // the credential's hash
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	repos map[string]bool // URLs of the Repos whose Sessions it reads
}

// conns is every tracked request.
type conns struct {
	mu  sync.Mutex
	set map[*conn]struct{}
}

type connKey struct{}

// Why a tracked request was ended.
var (
	errSignedOut    = errors.New("signed out")
	errMemberGone   = errors.New("removed from the Hub")
	errCredentialUp = errors.New("credential ended")
	errAccessLost   = errors.New("no longer has access to the Repo")
)

// track records a person's request until done is called, and returns the
// context its handler runs in.
func (cs *conns) track(ctx context.Context, p Principal, hash []byte) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c := &conn{user: p.User, kind: p.Kind, hash: string(hash), cancel: cancel}
	ctx = context.WithValue(ctx, connKey{}, c)
	cs.mu.Lock()
	cs.set[c] = struct{}{}
	cs.mu.Unlock()
	return ctx, func() {
		cs.mu.Lock()
		delete(cs.set, c)
		cs.mu.Unlock()
		cancel(nil)
	}
}

// end cancels every tracked request match picks.
func (cs *conns) end(why error, match func(*conn) bool) {
	cs.mu.Lock()
	var hit []*conn
	for c := range cs.set {
		if match(c) {
			hit = append(hit, c)
		}
	}
	cs.mu.Unlock()
	for _, c := range hit {
		c.cancel(why)
	}
}

// snapshot lists the tracked requests.
func (cs *conns) snapshot() []*conn {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	out := make([]*conn, 0, len(cs.set))
	for c := range cs.set {
		out = append(out, c)
	}
	return out
}

// readsRepo notes, on the request ctx belongs to, that it reads a Session of
// the Repo at url, so losing access to the Repo ends it.
func readsRepo(ctx context.Context, url string) {
	c, _ := ctx.Value(connKey{}).(*conn)
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.repos == nil {
		c.repos = map[string]bool{}
	}
	c.repos[url] = true
	c.mu.Unlock()
}

func (c *conn) repoURLs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.repos))
	for u := range c.repos {
		out = append(out, u)
	}
	return out
}

// endCredential ends every request made with one credential, by its hash.
func (g *guard) endCredential(hash []byte, why error) {
	g.conns.end(why, func(c *conn) bool { return c.hash == string(hash) })
}

// recheckCredentials reads each connection's credential again, without
// counting it as a use, and ends those whose credential has ended.
func (g *guard) recheckCredentials(ctx context.Context) {
	for _, c := range g.conns.snapshot() {
		var live bool
		var err error
		switch c.kind {
		case auth.Cookie:
			live, err = g.store.Signins.SigninLive(ctx, []byte(c.hash), g.life)
		case auth.CLI:
			live, err = g.store.Signins.CLITokenLive(ctx, []byte(c.hash))
		}
		if err == nil && !live {
			c.cancel(errCredentialUp)
		}
	}
}
