package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/github"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/pulls"
	"kndl.dev/kndl/internal/store"
)

// openPullAPI opens a Session's pull requests: its title and body masked,
// the branch the Session's own, recorded with the pulls Tracker.
type openPullAPI struct {
	core
	masks *masks.Sets
	pulls *pulls.Tracker
}

// openPull opens a pull request from a branch the Session pushed: POST
// /api/sessions/{id}/pulls. The Hub opens it as the GitHub App on a token
// minted for that alone (github.OpenPull), so no credential reaches the
// Sandbox for it; the body's last line names the Creator it was opened
// for. Only the Creator may, and only while GitHub gives them push
// permission on the Repo: the App may write pull requests, and must not
// do for someone what GitHub would not let them do themselves. Title and
// body are masked as the Session's text is before they leave the Hub.
func (h openPullAPI) openPull(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	var req api.NewPull
	if err := readJSON(r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	s, err := h.guard.drivableSession(ctx, p, r.PathValue("id"))
	if err == nil {
		err = checkNewPull(req)
	}
	if err == nil {
		err = h.checkPushedBranch(ctx, s.ID, req.Branch)
	}
	var owner, name string
	if err == nil {
		owner, name, err = h.pullRepo(ctx, p.User, s)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	np := github.NewPull{Head: req.Branch, Base: req.Base, Title: h.masks.RedactText(ctx, s.ID, req.Title),
		Body: withAuthorLine(h.masks.RedactText(ctx, s.ID, req.Body), h.authorLine(p.User, s.ID))}
	pull, err := h.guard.gh.OpenPull(ctx, owner, name, np)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.pulls.Opened(ctx, s.ID, req.Branch, pull); err != nil {
		h.log.Error("keep a pull request the Hub opened", "session", s.ID, "err", err)
	}
	writeJSON(w, http.StatusCreated, api.Pull{Number: pull.Number, Title: np.Title, URL: pull.URL, State: pull.State, Merged: pull.Merged, Draft: pull.Draft})
}

func checkNewPull(req api.NewPull) error {
	switch {
	case strings.TrimSpace(req.Branch) == "":
		return fmt.Errorf("name the branch to open the pull request from: %w", errdefs.ErrInvalid)
	case strings.TrimSpace(req.Title) == "":
		return fmt.Errorf("the pull request's title is empty: %w", errdefs.ErrInvalid)
	case len(req.Title) > api.MaxPullTitle:
		return fmt.Errorf("the title is %d bytes, over the %d-byte limit: %w", len(req.Title), api.MaxPullTitle, errdefs.ErrInvalid)
	case len(req.Body) > api.MaxPullBody:
		return fmt.Errorf("the body is %d bytes, over the %d-byte limit: %w", len(req.Body), api.MaxPullBody, errdefs.ErrTooLarge)
	}
	return nil
}

// checkPushedBranch refuses a branch the Session did not push: the Hub
// opens pull requests of a Session's own work alone.
func (h openPullAPI) checkPushedBranch(ctx context.Context, sessionID, branch string) error {
	bs, err := h.store.Branches.SessionBranches(ctx, sessionID)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(bs, func(b store.SessionBranch) bool { return b.Branch == branch }) {
		return fmt.Errorf("the Session pushed no branch %q: open a pull request from one of its pushed branches, which its view lists: %w", branch, errdefs.ErrInvalid)
	}
	return nil
}

// pullRepo is the Session's Repo on GitHub, if the Hub can open a pull
// request there for u.
func (h openPullAPI) pullRepo(ctx context.Context, u store.User, s store.Session) (owner, name string, err error) {
	gh := h.guard.gh
	if gh == nil || !gh.HasApp() {
		return "", "", fmt.Errorf("this Hub has no GitHub App (GITHUB_APP_ID), which opens pull requests: open it on GitHub, or ask the Owner to set one up: %w", errdefs.ErrConflict)
	}
	owner, name, ok := gh.ParseRepo(s.RepoURL)
	if !ok {
		return "", "", fmt.Errorf("the Session's Repo %s is not on this Hub's GitHub, so it has no pull requests: %w", s.RepoURL, errdefs.ErrConflict)
	}
	if !h.guard.canPush(ctx, u, s.RepoURL) {
		return "", "", fmt.Errorf("GitHub gives you no push permission on %s/%s, which opening a pull request from the Hub needs: ask for write access, or open it on GitHub from a fork: %w", owner, name, errdefs.ErrForbidden)
	}
	return owner, name, nil
}

// authorLine ends a pull request's body: the App opened it, for whom and
// from which Session.
func (h openPullAPI) authorLine(u store.User, sessionID string) string {
	who := u.Name
	if u.GitHubLogin != "" {
		who = "@" + u.GitHubLogin
	}
	from := "a kndl Session"
	if h.cfg.PublicURL != "" {
		from = "kndl Session " + strings.TrimSuffix(h.cfg.PublicURL, "/") + "/sessions/" + sessionID
	}
	return "Opened for " + who + " from " + from + "."
}

// withAuthorLine puts the author line after a body, ruled off from it.
func withAuthorLine(body, line string) string {
	if strings.TrimSpace(body) == "" {
		return line
	}
	return strings.TrimRight(body, "\n") + "\n\n---\n" + line
}
