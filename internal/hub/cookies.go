package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// Every cookie kndl sets is HttpOnly, SameSite=Lax, host-only (no Domain)
// and on path /, Secure unless it is served over plain HTTP on loopback,
// and a Secure one takes the __Host- prefix, which browsers accept only so
// (host-only, path /, Secure, from https). A forward origin is same-site
// with the Hub, so without the prefix an app served there could plant a
// cookie of the Hub's name on a parent domain: a sign-in of the attacker's
// (login CSRF), or a trip cookie of their own.

// cookieName is the name a cookie of kndl's base name has: prefixed when
// Secure.
func cookieName(base string, secure bool) string {
	if secure {
		return "__Host-" + base
	}
	return base
}

// newCookie makes a cookie as every cookie kndl sets is. maxAge 0 leaves
// it a browser-session cookie; <0 deletes it.
func newCookie(base, value string, secure bool, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: cookieName(base, secure), Value: value, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	switch {
	case maxAge > 0:
		c.MaxAge = int(maxAge / time.Second)
	case maxAge < 0:
		c.MaxAge = -1
	}
	return c
}

// cookie makes one of the Hub's own cookies, Secure unless the Hub is on
// loopback over HTTP.
func (g *guard) cookie(base, value string, maxAge time.Duration) *http.Cookie {
	return newCookie(base, value, g.secure, maxAge)
}

// read is the value of the request's Hub cookie of base name, or "".
func (g *guard) read(r *http.Request, base string) string {
	c, err := r.Cookie(cookieName(base, g.secure))
	if err != nil {
		return ""
	}
	return c.Value
}

// signinCookie is the sign-in cookie's base name.
const signinCookie = "kndl"

// startSignin signs the browser in as userID.
func (h *Hub) startSignin(ctx context.Context, w http.ResponseWriter, userID string) error {
	token, err := h.store.CreateSignin(ctx, userID)
	if err != nil {
		return err
	}
	// The cookie lives as long as the sign-in may; the Hub enforces both
	// lifetimes itself on every request.
	http.SetCookie(w, h.guard.cookie(signinCookie, token, h.cfg.SigninMaxAge))
	return nil
}

// signinToken is the request's sign-in cookie value, if it has one.
func (h *Hub) signinToken(r *http.Request) string {
	v := h.guard.read(r, signinCookie)
	if auth.KindOf(v) != auth.Cookie {
		return ""
	}
	return v
}

// cookiePrincipal resolves a sign-in cookie. A request that could change
// something, and a WebSocket, must come from HUB_PUBLIC_URL's origin: the
// cookie rides along on requests other sites make the browser send.
func (h *Hub) cookiePrincipal(ctx context.Context, r *http.Request, token string) (Principal, error) {
	u, err := h.store.UserBySignin(ctx, token, h.guard.life)
	if err != nil {
		return Principal{}, err
	}
	if needsOrigin(r) && !h.sameOrigin(r) {
		return Principal{}, fmt.Errorf("a signed-in browser request that changes anything, or opens a WebSocket, must come from the Hub's own pages at %s: %w",
			h.guard.origin, errdefs.ErrForbidden)
	}
	return Principal{Kind: auth.Cookie, User: u}, nil
}

// needsOrigin reports whether a request must come from the Hub's origin to
// use a cookie: anything but a plain read.
func needsOrigin(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	}
	return true
}

// sameOrigin reports whether the browser says the request comes from
// HUB_PUBLIC_URL's origin. Browsers send Origin on every POST, PUT, PATCH,
// DELETE and WebSocket; its absence is refused.
func (h *Hub) sameOrigin(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Origin"), h.guard.origin)
}

// wantsPage reports whether a request is a browser navigating, which is
// sent to sign in rather than answered 401.
func wantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.Header.Get("Sec-Fetch-Mode") == "navigate" || strings.Contains(r.Header.Get("Accept"), "text/html"))
}
