package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/errdefs"
)

// defaultSudoMaxAge is HUB_SUDO_MAX_AGE's default.
const defaultSudoMaxAge = 10 * time.Minute

// reauthHeader marks a refusal for want of a recent sign-in, with the most
// a sign-in's age may be, in seconds: the web UI sends the person to sign
// in again and back (app.js).
const reauthHeader = "X-Kndl-Sign-In-Again"

// recent is a privileged act's route (cloop's sudo mode): its handler runs
// only if the person behind the request signed in, in a browser, within
// HUB_SUDO_MAX_AGE (checkRecent). It is declared in the route table and
// enforced before the handler, so no handler can forget it.
func (h *Hub) recent(next handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request, p Principal) {
		if _, err := h.checkRecent(r.Context(), p); err != nil {
			w.Header().Set(reauthHeader, strconv.Itoa(int(h.cfg.SudoMaxAge/time.Second)))
			h.writeError(w, r, err)
			return
		}
		next(w, r, p)
	}
}

// checkRecent returns when the person behind p last signed in in a browser
// if that is within HUB_SUDO_MAX_AGE, and ErrForbidden saying how to sign
// in again if not. A sign-in cookie counts from its sign-in; a CLI token
// from the browser sign-in that approved it, never from the approval, so a
// stolen CLI token, like a stolen cookie, does privileged acts for at most
// HUB_SUDO_MAX_AGE after its owner last signed in, and approving a CLI
// login is itself such an act: a stale cookie can't make a fresh token.
func (h core) checkRecent(ctx context.Context, p Principal) (time.Time, error) {
	at, err := h.store.Signins.SignedInAt(ctx, p.cred)
	if errors.Is(err, errdefs.ErrNotFound) {
		err = fmt.Errorf("your sign-in ended meanwhile: %w", errdefs.ErrUnauthorized)
	}
	if err != nil {
		return time.Time{}, err
	}
	if time.Since(at) < h.cfg.SudoMaxAge {
		return at, nil
	}
	age := minutes(h.cfg.SudoMaxAge)
	if p.Kind == auth.CLI {
		return time.Time{}, fmt.Errorf("this needs a sign-in within the last %s, and this CLI token was approved by a browser sign-in from longer ago: "+
			"run kndl login again, and approve it in a browser you signed in to within %s: %w", age, age, errdefs.ErrForbidden)
	}
	return time.Time{}, fmt.Errorf("this needs a sign-in within the last %s: sign in again, then try again: %w", age, errdefs.ErrForbidden)
}

// minutes says a duration as a person reads it: "10 minutes", "90 seconds".
func minutes(d time.Duration) string {
	switch {
	case d == time.Minute:
		return "minute"
	case d%time.Minute == 0:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%d seconds", d/time.Second)
	}
	return d.String()
}

// signInAgain is where a page sends a browser whose sign-in is too old for
// what it asked: to sign in, and back to next.
func signInAgain(next string) string { return "/signin?next=" + url.QueryEscape(next) }
