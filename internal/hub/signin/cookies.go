// Package signin is what the Hub lets a browser or a credential in by
// before any handler runs: its cookies, as every cookie kndl sets is made,
// and the limit on failed sign-ins and credential guesses per address.
// The Hub (internal/hub) and its port-forward proxy (internal/hub/forward)
// import it.
package signin

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Every cookie kndl sets is HttpOnly, SameSite=Lax, host-only (no Domain)
// and on path /, Secure unless it is served over plain HTTP on loopback,
// and a Secure one takes the __Host- prefix, which browsers accept only so
// (host-only, path /, Secure, from https). A forward origin is same-site
// with the Hub, so without the prefix an app served there could plant a
// cookie of the Hub's name on a parent domain: a sign-in of the attacker's
// (login CSRF), or a trip cookie of their own.

// CookieName is the name a cookie of kndl's base name has: prefixed when
// Secure.
func CookieName(base string, secure bool) string {
	if secure {
		return "__Host-" + base
	}
	return base
}

// NewCookie makes a cookie as every cookie kndl sets is. maxAge 0 leaves
// it a browser-session cookie; <0 deletes it.
func NewCookie(base, value string, secure bool, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: CookieName(base, secure), Value: value, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	switch {
	case maxAge > 0:
		c.MaxAge = int(maxAge / time.Second)
	case maxAge < 0:
		c.MaxAge = -1
	}
	return c
}

// Cookie is the sign-in cookie's base name.
const Cookie = "kndl"

// NeedsOrigin reports whether a request must come from the Hub's origin to
// use a cookie: anything but a plain read.
func NeedsOrigin(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
	}
	return true
}

// WantsPage reports whether a request is a browser navigating, which is
// sent to sign in rather than answered 401.
func WantsPage(r *http.Request) bool {
	return r.Method == http.MethodGet && (r.Header.Get("Sec-Fetch-Mode") == "navigate" || strings.Contains(r.Header.Get("Accept"), "text/html"))
}

// LocalPath returns next if it is a path on this Hub, else "/": a sign-in
// never sends the browser elsewhere. Browsers drop tabs and newlines from
// a Location and read a backslash as a slash, so "/\t/evil.com" would take
// them to //evil.com: next must start with a single "/" and hold nothing
// but printable ASCII other than a backslash, as itself and once
// percent-decoded (a path taken from a query is decoded once already).
func LocalPath(next string) string {
	dec, err := url.PathUnescape(next)
	if err != nil || !plainPath(next) || !plainPath(dec) {
		return "/"
	}
	return next
}

func plainPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f || p[i] == '\\' {
			return false
		}
	}
	return true
}
