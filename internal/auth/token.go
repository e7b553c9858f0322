// Package auth is where kndl's credentials are made and checked: random
// tokens with a kind prefix, the one SHA-256 hasher every stored token goes
// through, the one HMAC-SHA256 webhook signatures are made of, and
// constant-time comparison. The Hub, the Runner's relay, the
// store and the CLI (which makes its own token at kndl login) import it;
// nothing keeps a token in the clear but its holder.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"strings"
)

// Kind is a credential's kind. Its prefix on the token lets a person (and
// redaction by shape) tell tokens apart; the zero Kind is invalid, so a route
// that declares no credential cannot register.
type Kind int

const (
	_ Kind = iota
	// Public routes take no credential.
	Public
	// Cookie is a person's sign-in cookie from a browser.
	Cookie
	// CLI is a person's kndl CLI token.
	CLI
	// Runner is a Runner's token.
	Runner
	// Mod is one run of one Session's mod token, held by its Runner.
	Mod
	// Session is a Session token, the only credential inside a Sandbox;
	// only the Runner's relay accepts it.
	Session
	// Setup is the Setup link's secret: it makes its holder the Owner, once.
	// Like Invite, it is handed to the sign-in flow, never to a route.
	Setup
	// Invite is an Invite's secret: it lets one GitHub login in, once.
	Invite
	// Metrics is the Hub's metrics token, which the Owner makes on the
	// Hub's machine for a Prometheus scraper: it reads /metrics and nothing
	// else.
	Metrics
	// Webhook is a GitHub webhook delivery's signature (X-Hub-Signature-256)
	// under the App's webhook secret. It is over the body, so the route's
	// handler checks it, before it acts on anything.
	Webhook
)

var kindNames = map[Kind]string{Public: "public", Cookie: "cookie", CLI: "cli", Runner: "runner", Mod: "mod", Session: "session",
	Setup: "setup link", Invite: "invite", Metrics: "metrics", Webhook: "GitHub webhook signature"}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return "unset"
}

// prefix is the token prefix of each kind that is a bearer token. Metrics
// is kndlp_ (for Prometheus): kndlm_ was the mod token's already.
var prefix = map[Kind]string{Cookie: "kndlk_", CLI: "kndlc_", Runner: "kndlr_", Mod: "kndlm_", Session: "kndls_",
	Setup: "kndlo_", Invite: "kndli_", Metrics: "kndlp_"}

// TokenBytes is the entropy of every token: 256 bits.
const TokenBytes = 32

// NewToken returns a fresh token of kind k and its hash. Show the token once;
// keep only the hash.
func NewToken(k Kind) (token string, hash []byte) {
	b := make([]byte, TokenBytes)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // the kernel's RNG does not fail
	}
	token = prefix[k] + base64.RawURLEncoding.EncodeToString(b)
	return token, Hash(token)
}

// KindOf reports the kind a token's prefix claims, or 0.
func KindOf(token string) Kind {
	for k, p := range prefix {
		if strings.HasPrefix(token, p) {
			return k
		}
	}
	return 0
}

// Hash is the one hasher for stored tokens, links and invites: SHA-256.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// MAC is body's HMAC-SHA256 under key: what a webhook's "sha256="
// signature carries in hex, GitHub's deliveries to the Hub and the Hub's
// notification posts alike (the same format on purpose, so a receiver
// checks either with the same code). Compare one with Equal.
func MAC(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

// Equal compares two hashes in constant time.
func Equal(a, b []byte) bool {
	return subtle.ConstantTimeCompare(a, b) == 1
}
