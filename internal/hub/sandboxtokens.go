package hub

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// forge is the forge the Hub mints Sessions' tokens on and reads their
// pull requests from: GitHub, nil without it (no GITHUB_CLIENT_ID).
func (h core) forge() forge.Forge {
	if h.guard.gh == nil {
		return nil // not a typed nil
	}
	return h.guard.gh
}

// repoToken mints a token of the forge for a Session's Repo alone, with
// access: fresh for each request, never cached or shared. It returns
// ErrNotFound without GitHub's App or with the App not on the Repo.
func (h core) repoToken(ctx context.Context, s store.Session, access forge.Access) (protocol.GitHubToken, error) {
	f := h.forge()
	if f == nil {
		return protocol.GitHubToken{}, fmt.Errorf("this Hub has no GitHub App (GITHUB_APP_ID): %w", errdefs.ErrNotFound)
	}
	owner, name, ok := f.ParseRepo(s.RepoURL)
	if !ok {
		return protocol.GitHubToken{}, fmt.Errorf("the Session's Repo is not on %s: %w", h.cfg.GitHubURL, errdefs.ErrNotFound)
	}
	tok, err := f.MintToken(ctx, owner, name, access)
	if err != nil {
		return protocol.GitHubToken{}, err
	}
	return protocol.GitHubToken{Token: tok.Value, ExpiresAt: tok.Expires, ExpiresIn: int64(time.Until(tok.Expires) / time.Second), URL: h.cfg.GitHubURL}, nil
}

// sandboxToken mints a Session's Sandbox token and masks it in the
// Session's text from then on, as long as the Session runs: the set keeps
// every token it was given, the previous one with the current, and the
// store keeps it sealed so a restarted Hub goes on masking it. The token
// pushes and writes pull requests only if the Session's Creator may push
// to the Repo, asked of GitHub at each mint, so one who lost push gets a
// read-only token at the next refresh; the Session's view says which.
func (h runnersAPI) sandboxToken(ctx context.Context, s store.Session) (protocol.GitHubToken, error) {
	creator, err := h.store.Members.UserByID(ctx, s.CreatorID)
	if err != nil {
		return protocol.GitHubToken{}, err
	}
	access, git := forge.Read, gitRead
	if h.guard.askGitHub(ctx, creator, s.RepoURL, true, true) { // fresh: canPush without the cache
		access, git = forge.Push, gitWrite
	}
	tok, err := h.repoToken(ctx, s, access)
	if err != nil {
		return tok, err
	}
	if changed, err := h.store.Sessions.SetSandboxGit(ctx, s.ID, git); err != nil {
		return protocol.GitHubToken{}, err
	} else if changed {
		h.sessions.Changed(s.ID)
	}
	if err := h.masks.Keep(ctx, s.ID, tok.Token); err != nil {
		return protocol.GitHubToken{}, err
	}
	if err := h.tokens.Minted(ctx, s.ID, tok.Token); err != nil {
		return protocol.GitHubToken{}, err
	}
	return tok, nil
}

// What a Sandbox token lets git do (store.Session.SandboxGit).
const (
	gitWrite = "write"
	gitRead  = "read"
)
