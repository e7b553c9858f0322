package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/hub/signin"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/web"
)

// signinAPI serves sign-in: its pages, GitHub's and the dev sign-in, and
// signing out (signin.go, guard.go). CLI login is cliLoginAPI's.
type signinAPI struct {
	core
	refusals *refusals // the Hub's: sign-in refusals the audit log recorded this minute
}

// Cookies that carry a sign-in across the trip to GitHub and back: the
// OAuth state, and the Setup link's or Invite's secret. Both live at most
// signinTrip, and are cleared as the browser comes back.
const (
	oauthCookie = "kndl_oauth"
	claimCookie = "kndl_claim"
	signinTrip  = 10 * time.Minute
)

// SetupLink returns a fresh Setup link while the Hub has no Owner: whoever
// opens it and signs in with GitHub becomes the Owner, once. It replaces
// any link made before. With an Owner it returns "". kndl hub prints it at
// start.
func (h *Hub) SetupLink(ctx context.Context) (string, error) {
	secret, err := h.store.Members.NewSetupLink(ctx)
	if errors.Is(err, errdefs.ErrConflict) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(h.cfg.PublicURL, "/") + "/setup#" + secret, nil
}

// renderPage renders a sign-in or CLI login page, logging a failure to.
func renderPage(log *slog.Logger, w http.ResponseWriter, status int, p web.Page, data any) {
	if err := web.Render(w, status, p, nil, data); err != nil {
		log.Error("render page", "err", err)
	}
}

// messagePage renders a page that says what went wrong, with a link to
// start again.
func messagePage(log *slog.Logger, w http.ResponseWriter, status int, title, text string) {
	renderPage(log, w, status, web.Message.WithTitle(title), struct{ Text, Link string }{text, "/signin"})
}

// noticePage renders a page that says what happened.
func noticePage(log *slog.Logger, w http.ResponseWriter, title, text string) {
	renderPage(log, w, http.StatusOK, web.Message.WithTitle(title), struct{ Text, Link string }{text, ""})
}

// refuse is the one answer to everyone the Hub doesn't let in, whatever
// they brought: it says only that the Hub is invite-only, and nothing of
// them is recorded. It counts against their address.
func (h signinAPI) refuse(w http.ResponseWriter, r *http.Request) {
	if !h.failedTooOften(w, r) {
		renderPage(h.log, w, http.StatusForbidden, web.Refused, nil)
	}
}

// signinFailed answers a sign-in that failed, and counts it against the
// address it came from.
func (h signinAPI) signinFailed(w http.ResponseWriter, r *http.Request, title, text string) {
	if !h.failedTooOften(w, r) {
		messagePage(h.log, w, http.StatusBadRequest, title, text)
	}
}

// failedTooOften counts a failed sign-in against its address and, if the
// address had no attempts left, answers it as too many and reports so.
// Only failures count and only failures are refused, as on the API: junk
// from an address shared with the team (a NAT, a proxy) never holds up a
// valid sign-in from it.
func (h signinAPI) failedTooOften(w http.ResponseWriter, r *http.Request) bool {
	if h.guard.fails.Take(signin.ClientAddr(r)) {
		return false
	}
	w.Header().Set("Retry-After", fmt.Sprint(int(signin.FailRefill/time.Second)))
	messagePage(h.log, w, http.StatusTooManyRequests, "Too many attempts", "Too many failed sign-ins from your address. Wait a minute and try again.")
	return true
}

func (h signinAPI) signinPage(w http.ResponseWriter, r *http.Request, _ Principal) {
	next := r.URL.Query().Get("next")
	if next != "" {
		next = signin.LocalPath(next)
	}
	renderPage(h.log, w, http.StatusOK, web.SignIn, struct {
		GitHub, Dev bool
		Next        string
	}{h.guard.gh != nil, h.devLoginAnswers(r), next})
}

func (h signinAPI) setupPage(w http.ResponseWriter, r *http.Request, _ Principal) {
	renderPage(h.log, w, http.StatusOK, web.Setup, struct{ Setup bool }{true})
}

func (h signinAPI) invitePage(w http.ResponseWriter, r *http.Request, _ Principal) {
	renderPage(h.log, w, http.StatusOK, web.Invited, struct{ Setup bool }{false})
}

func (h signinAPI) static(w http.ResponseWriter, r *http.Request, _ Principal) {
	web.Static().ServeHTTP(w, r)
}

// claim takes a Setup link's or Invite's secret from the landing page's
// script, just before it goes to GitHub, and holds it in a cookie until
// GitHub sends the browser back. Whether it is any good is decided then,
// with who GitHub says signed in, and refused alike.
func (h signinAPI) claim(w http.ResponseWriter, r *http.Request, _ Principal) {
	if !h.guard.sameOrigin(r) {
		h.writeError(w, r, fmt.Errorf("this must come from the Hub's own page at %s: %w", h.guard.origin, errdefs.ErrForbidden))
		return
	}
	var req api.Claim
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if k := auth.KindOf(req.Secret); (k != auth.Setup && k != auth.Invite) || len(req.Secret) > 100 {
		h.writeError(w, r, fmt.Errorf("that is not a Setup link or an Invite: open the whole link you were given: %w", errdefs.ErrInvalid))
		return
	}
	if h.guard.gh == nil {
		h.writeError(w, r, fmt.Errorf("this Hub has no GitHub sign-in set up (GITHUB_CLIENT_ID): %w", errdefs.ErrUnavailable))
		return
	}
	http.SetCookie(w, h.guard.cookie(claimCookie, req.Secret, signinTrip))
	w.WriteHeader(http.StatusNoContent)
}

// oauthTrip is what the browser carries to GitHub and back in oauthCookie.
type oauthTrip struct {
	State    string `json:"s"`
	Verifier string `json:"v"`
	Next     string `json:"n"`
}

func randomString() string {
	b := make([]byte, auth.TokenBytes)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (h signinAPI) redirectURI() string {
	return strings.TrimSuffix(h.cfg.PublicURL, "/") + "/signin/github/callback"
}

// githubSignin sends the browser to GitHub, with a state and a PKCE
// verifier only this browser holds.
func (h signinAPI) githubSignin(w http.ResponseWriter, r *http.Request, _ Principal) {
	if h.guard.gh == nil {
		messagePage(h.log, w, http.StatusServiceUnavailable, "No GitHub sign-in", "This Hub has no GitHub sign-in set up: its operator sets GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET.")
		return
	}
	trip := oauthTrip{State: randomString(), Verifier: randomString(), Next: signin.LocalPath(r.URL.Query().Get("next"))}
	b, _ := json.Marshal(trip)
	http.SetCookie(w, h.guard.cookie(oauthCookie, base64.RawURLEncoding.EncodeToString(b), signinTrip))
	http.Redirect(w, r, h.guard.gh.AuthorizeURL(h.redirectURI(), trip.State, github.Challenge(trip.Verifier)), http.StatusFound)
}

// githubCallback is where GitHub sends the browser back. The Hub lets in a
// Member; the Owner, with the Setup link; someone with an Invite for their
// login. Everyone else is refused alike.
func (h signinAPI) githubCallback(w http.ResponseWriter, r *http.Request, _ Principal) {
	// Both trip cookies are used once, whatever happens next.
	http.SetCookie(w, h.guard.cookie(oauthCookie, "", -1))
	http.SetCookie(w, h.guard.cookie(claimCookie, "", -1))
	var trip oauthTrip
	b, err := base64.RawURLEncoding.DecodeString(h.guard.read(r, oauthCookie))
	if err == nil {
		err = json.Unmarshal(b, &trip)
	}
	q := r.URL.Query()
	if err != nil || trip.State == "" || !auth.Equal([]byte(q.Get("state")), []byte(trip.State)) {
		h.signinFailed(w, r, "Sign-in expired", "That sign-in expired or was not started here. Start again.")
		return
	}
	if q.Get("error") != "" || q.Get("code") == "" || h.guard.gh == nil {
		h.signinFailed(w, r, "Not signed in", "GitHub did not sign you in. Start again.")
		return
	}
	ghUser, err := h.guard.gh.SignIn(r.Context(), q.Get("code"), h.redirectURI(), trip.Verifier)
	if errors.Is(err, errdefs.ErrUnavailable) {
		h.log.Warn("GitHub sign-in failed", "err", err)
		messagePage(h.log, w, http.StatusServiceUnavailable, "GitHub can't be reached", "The Hub could not reach GitHub to sign you in. Try again in a moment.")
		return
	}
	if err != nil {
		h.signinFailed(w, r, "Not signed in", "GitHub did not confirm the sign-in. Start again.")
		return
	}
	claim := h.guard.read(r, claimCookie)
	u, err := h.admit(r, store.GitHubIdentity{ID: ghUser.ID, Login: ghUser.Login, Name: ghUser.Name}, claim)
	if errors.Is(err, errdefs.ErrUnauthorized) {
		h.auditRefusal(r, claim)
		h.refuse(w, r)
		return
	}
	if err == nil {
		err = h.startSignin(r.Context(), w, u.ID)
	}
	if err != nil {
		h.log.Error("sign-in failed", "err", err)
		messagePage(h.log, w, http.StatusInternalServerError, "Not signed in", "The Hub failed to sign you in; its log has the detail.")
		return
	}
	h.log.Info("signed in", "user", u.Name, "github", u.GitHubLogin)
	http.Redirect(w, r, signin.LocalPath(trip.Next), http.StatusSeeOther)
}

// admit decides whether who GitHub says signed in gets in: as a Member
// already, as the Owner with the Setup link, or with an Invite for their
// login. Anyone else is ErrUnauthorized, and nothing of them is recorded.
// Who joins is recorded in the audit log.
func (h signinAPI) admit(r *http.Request, gh store.GitHubIdentity, claim string) (store.User, error) {
	ctx := r.Context()
	u, err := h.store.Members.MemberByGitHub(ctx, gh)
	if !errors.Is(err, errdefs.ErrNotFound) {
		return u, err
	}
	switch auth.KindOf(claim) {
	case auth.Setup:
		u, err = h.store.Members.ClaimSetupLink(ctx, claim, gh)
		if err == nil {
			h.log.Info("the Setup link was used: the Hub has its Owner", "github", gh.Login)
			h.audit(r, Principal{User: u}, auditMemberJoined, "@"+gh.Login, "the Owner, with the Setup link")
		}
		return u, err
	case auth.Invite:
		u, err = h.store.Members.RedeemInvite(ctx, claim, gh)
		if err == nil {
			h.audit(r, Principal{User: u}, auditMemberJoined, "@"+gh.Login, "with the Invite for their login, used up")
		}
		return u, err
	}
	return store.User{}, fmt.Errorf("not a Member: %w", errdefs.ErrUnauthorized)
}

// signout ends the browser's sign-in at once, and everything it opened.
func (h signinAPI) signout(w http.ResponseWriter, r *http.Request, p Principal) {
	if err := h.store.Signins.EndSignin(r.Context(), h.guard.signinToken(r)); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.guard.endCredential(p.cred, errSignedOut)
	http.SetCookie(w, h.guard.cookie(signin.Cookie, "", -1))
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// devLoginAnswers reports whether dev login answers this request: it is on
// (kndl dev), the Hub is bound to loopback, and the caller is on loopback,
// asked for a loopback name, and came through no proxy (a proxy on the
// Hub's machine would make anyone look local).
func (h signinAPI) devLoginAnswers(r *http.Request) bool {
	if !h.cfg.DevLogin || !signin.IsLoopbackHost(signin.HostOf(h.cfg.Listen)) || !signin.IsLoopbackHost(signin.HostOf(r.RemoteAddr)) || !signin.IsLoopbackHost(signin.HostOf(r.Host)) {
		return false
	}
	for _, hdr := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip", "Forwarded"} {
		if r.Header.Get(hdr) != "" {
			return false
		}
	}
	return true
}

// devSignin signs the browser in as the dev user. Where dev login doesn't
// answer, it is as if there were no such route.
func (h signinAPI) devSignin(w http.ResponseWriter, r *http.Request, _ Principal) {
	if !h.devLoginAnswers(r) {
		http.NotFound(w, r)
		return
	}
	if !h.guard.sameOrigin(r) {
		h.writeError(w, r, fmt.Errorf("dev login must come from the Hub's own sign-in page at %s: %w", h.guard.origin, errdefs.ErrForbidden))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	r.ParseForm()
	u, err := h.store.Members.DevUser(r.Context())
	if err == nil {
		err = h.startSignin(r.Context(), w, u.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	http.Redirect(w, r, signin.LocalPath(r.PostFormValue("next")), http.StatusSeeOther)
}
