package hub

import (
	"context"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/pulls"
	"kndl.dev/kndl/internal/hub/session"
	"kndl.dev/kndl/internal/loadscode"
	"kndl.dev/kndl/internal/store"
)

// These turn store rows into the api types the Hub answers with, field by
// field (coder's db2sdk), one function per row: store rows carry no json
// tags (tests/style keeps it so), so every answer goes through here.
// wire_test.go pins the JSON each one makes.

func apiSession(s store.Session) api.Session {
	return api.Session{ID: s.ID, RepoID: s.RepoID, RepoURL: s.RepoURL, CreatorID: s.CreatorID, RunnerID: s.RunnerID,
		Title: s.Title, Model: s.Model, Effort: s.Effort, State: api.SessionState(s.State), StateDetail: s.StateDetail,
		KeepAwake: s.KeepAwake, ThreadContext: s.ThreadContext, SandboxGit: s.SandboxGit, Conversation: s.Conversation, ArchivedAt: s.ArchivedAt, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
		Place: s.Place, Triggered: s.Triggered, Turns: s.Turns}
}

func apiRepoLimits(l store.RepoLimits) api.RepoLimits {
	return api.RepoLimits{MaxTurns: l.MaxTurns, MaxTurnHours: l.MaxTurnHours, MaxSpend: l.MaxSpend, MaxSessionSpend: l.MaxSessionSpend,
		GitHubAttempts: l.GitHubAttempts}
}

// sessionRows turns Sessions into what the API, the pages and the live
// streams show of them: with what each is doing now, its pull requests
// (titles masked) and what it spent. The Session handlers, the view and
// the pages hold it alike.
type sessionRows struct {
	core
	sessions *session.Owner
	pulls    *pulls.Tracker
	masks    *masks.Sets
}

// now is a Session as the API shows it, with what it is doing now.
func (h sessionRows) now(s store.Session) api.Session {
	a := apiSession(s)
	a.Activity = h.sessions.Activity(s.ID)
	return a
}

// view is a Session with its queue, what it is doing now, the branches it
// pushed, and what it spent.
func (h sessionRows) view(ctx context.Context, s store.Session, q []store.Prompt) (api.SessionView, error) {
	bs, err := h.branches(ctx, s.ID)
	if err != nil {
		return api.SessionView{}, err
	}
	spent, err := h.sessionSpent(ctx, s.ID)
	a := h.now(s)
	a.Pull = newestPull(bs)
	v := api.SessionView{Session: a, Queue: apiAll(q, apiPrompt), Branches: bs, Usage: spent}
	if err == nil {
		v.AttemptSet, v.ForkOf, err = h.lineage(ctx, s.ID)
	}
	return v, err
}

// lineage is the attempt set Session id is an attempt of ("" for none)
// and what it was forked from (nil for no fork).
func (h sessionRows) lineage(ctx context.Context, id string) (string, *api.Fork, error) {
	set, f, ok, err := h.store.Sessions.Lineage(ctx, id)
	if !ok || err != nil {
		return set, nil, err
	}
	from := apiFork(f)
	return set, &from, nil
}

// list are Sessions as the Sessions list shows them, changed in place:
// each with its newest pull request and what it spent, each read for every
// row in one query rather than one a row.
func (h sessionRows) list(ctx context.Context, rows []api.Session) []api.Session {
	ids := make([]string, len(rows))
	for i, a := range rows {
		ids[i] = a.ID
	}
	// A row shows without what could not be read.
	sums, err := h.store.Usage.SessionsUsage(ctx, ids)
	if err != nil {
		h.log.Error("read what the listed Sessions spent", "err", err)
	}
	branches, err := h.pulls.BranchesOf(ctx, ids)
	if err != nil {
		h.log.Error("read the listed Sessions' branches", "err", err)
	}
	for i := range rows {
		rows[i].Pull = newestPull(h.maskPulls(ctx, rows[i].ID, branches[rows[i].ID]))
		if u := sums[rows[i].ID]; len(u) > 0 {
			spent := spentOf(u)
			rows[i].Spent = &spent
		}
	}
	return rows
}

// branches are the branches a Session pushed, with their pull requests.
// A pull request's title is text of the Session's too: Claude may have
// written it, so it is masked.
func (h sessionRows) branches(ctx context.Context, sessionID string) ([]api.Branch, error) {
	bs, err := h.pulls.Branches(ctx, sessionID)
	return h.maskPulls(ctx, sessionID, bs), err
}

// maskPulls masks the titles of the pull requests of a Session's
// branches, in place.
func (h sessionRows) maskPulls(ctx context.Context, sessionID string, bs []api.Branch) []api.Branch {
	for i := range bs {
		for j := range bs[i].Pulls {
			bs[i].Pulls[j].Title = h.masks.RedactText(ctx, sessionID, bs[i].Pulls[j].Title)
		}
	}
	return bs
}

// newestPull is the highest-numbered of the branches' pull requests
// (GitHub numbers them in the order they are opened), nil for none.
func newestPull(bs []api.Branch) *api.Pull {
	var newest *api.Pull
	for _, b := range bs {
		for i := range b.Pulls {
			if newest == nil || b.Pulls[i].Number > newest.Number {
				newest = &b.Pulls[i]
			}
		}
	}
	return newest
}

func apiPrompt(p store.Prompt) api.Prompt {
	a := api.Prompt{ID: p.ID, SessionID: p.SessionID, AuthorID: p.AuthorID, Text: p.Text, IsCommand: p.IsCommand,
		State: string(p.State), CreatedAt: p.CreatedAt, DeliveredAt: p.DeliveredAt}
	if len(p.Attachments) > 0 {
		a.Attachments = apiAll(p.Attachments, apiAttachment)
	}
	if p.Source.Kind != "" {
		a.Source = &api.PromptSource{Kind: p.Source.Kind, Name: p.Source.Name}
	}
	return a
}

// apiAttachment leaves out SHA256, which is for the Hub and the Runner.
func apiAttachment(a store.Attachment) api.Attachment {
	return api.Attachment{ID: a.ID, SessionID: a.SessionID, PromptID: a.PromptID, Name: a.Name, File: a.File,
		Type: a.MediaType, Size: a.Size, Text: a.IsText, CreatedBy: a.CreatedBy, CreatedAt: a.CreatedAt}
}

func apiRunner(r store.Runner) api.Runner {
	return api.Runner{ID: r.ID, Name: r.Name, CreatedBy: r.CreatedBy, Shared: r.Shared, CreatedAt: r.CreatedAt, LastSeenAt: r.LastSeenAt, RevokedAt: r.RevokedAt}
}

func apiInvite(i store.Invite) api.Invite {
	return api.Invite{ID: i.ID, GitHubLogin: i.GitHubLogin, CreatedBy: i.CreatedBy, CreatedAt: i.CreatedAt,
		ExpiresAt: i.ExpiresAt, UsedAt: i.UsedAt, RevokedAt: i.RevokedAt}
}

func apiRepo(r store.Repo) api.Repo {
	return api.Repo{ID: r.ID, URL: r.URL, Name: r.Name, CreatedAt: r.CreatedAt}
}

// apiVariable leaves out Sealed, which is for the Hub alone.
func apiVariable(v store.Variable) api.Variable {
	a := api.Variable{ID: v.ID, RepoID: v.RepoID, Name: v.Name, Value: v.Value, Sensitive: v.Sensitive,
		AtBuild: v.AtBuild, LoadsCode: v.LoadsCode, SetBy: v.SetBy, SetAt: v.SetAt, Shared: v.Shared, From: v.Source}
	if r, ok := loadscode.Match(v.Name); ok {
		a.LoadsCodeRule = r.Pattern + ": " + r.Why
	}
	return a
}

func apiUser(u store.User) api.User {
	return api.User{ID: u.ID, GitHubLogin: u.GitHubLogin, Name: u.Name, IsOwner: u.IsOwner, IsDev: u.IsDev, CreatedAt: u.CreatedAt}
}

func apiTestBuild(t store.TestBuild) api.TestBuild {
	return api.TestBuild{ID: t.ID, RepoID: t.RepoID, BuildDigest: t.BuildDigest, RunnerID: t.RunnerID, State: t.State,
		Detail: t.Detail, Log: t.Log, StartedBy: t.StartedBy, StartedAt: t.StartedAt, EndedAt: t.EndedAt}
}

// apiEnvironment carries each version's settings once, read; the Config
// string the store keeps them as stays in the Hub.
func apiEnvironment(v environment.View) api.Environment {
	a := api.Environment{RepoID: v.RepoID, Current: apiEnvironmentVersion(v.Current)}
	if v.Draft != nil {
		d := apiEnvironmentDraft(*v.Draft)
		a.Draft = &d
	}
	return a
}

func apiEnvironmentVersion(v environment.Version) api.EnvironmentVersion {
	return api.EnvironmentVersion{RepoID: v.RepoID, Version: v.Version, BuildDigest: v.BuildDigest, BuildVersion: v.BuildVersion,
		Changes: v.Changes, CreatedBy: v.CreatedBy, CreatedAt: v.CreatedAt, Settings: api.EnvironmentSettings(v.Settings)}
}

func apiEnvironmentDraft(d environment.Draft) api.EnvironmentDraft {
	a := api.EnvironmentDraft{RepoID: d.RepoID, BaseVersion: d.BaseVersion, UpdatedBy: d.UpdatedBy, UpdatedAt: d.UpdatedAt,
		Settings: api.EnvironmentSettings(d.Settings), Changes: d.Changes, NeedsTest: d.NeedsTest}
	if d.Test != nil {
		t := apiTestBuild(*d.Test)
		a.Test = &t
	}
	if d.SourcePath != "" {
		a.From = &api.DraftSource{Path: d.SourcePath, Commit: d.SourceCommit, Notes: d.Source().Notes}
	}
	return a
}

// apiAll converts a list; never nil, so the list is [] in JSON, not null.
func apiAll[R, A any](rows []R, f func(R) A) []A {
	out := make([]A, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}

func apiAutoFix(a store.AutoFix) api.AutoFix {
	return api.AutoFix{CI: a.CI, Reviews: a.Reviews, Max: a.Max}
}

func apiNotifyWebhook(w store.NotifyWebhook) api.NotifyWebhook {
	return api.NotifyWebhook{ID: w.ID, URL: w.URL, Format: w.Format, FailingSince: w.FailingSince, LastError: w.LastError,
		StoppedAt: w.StoppedAt, CreatedAt: w.CreatedAt}
}
