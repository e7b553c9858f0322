package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/devcontainer"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
	"kndl.dev/kndl/internal/hub/masks"
	"kndl.dev/kndl/internal/hub/notify"
	"kndl.dev/kndl/internal/loadscode"
	"kndl.dev/kndl/internal/ociimage"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// devcontainerPaths are where a Repo's devcontainer.json is looked for,
// in order, when the request names none: the specification's places.
var devcontainerPaths = []string{".devcontainer/devcontainer.json", ".devcontainer.json"}

// fromDevcontainer makes the Repo's draft from its devcontainer.json at
// its default branch: the current version's settings with what the file
// says over them. A file kndl refuses changes nothing.
func (h environmentsAPI) fromDevcontainer(w http.ResponseWriter, r *http.Request, p Principal) {
	ctx := r.Context()
	repo, err := h.guard.repoToChange(ctx, p, r.PathValue("repo"), "Environment")
	var req api.FromDevcontainer
	if err == nil {
		err = readJSON(r, &req)
	}
	var v environment.View
	if err == nil {
		v, err = h.draftFromDevcontainer(ctx, repo.ID, repo.URL, req.Path, p.User.ID)
	}
	if err == nil && req.Follow != nil {
		err = h.setFollow(ctx, repo.ID, v, *req.Follow, p.User.ID)
	}
	a := apiEnvironment(v)
	if err == nil {
		a.Follows, err = h.follows(ctx, repo.ID)
	}
	h.reply(w, r, http.StatusOK, a, err)
}

// setFollow turns following the file the draft v was made from on or off.
func (h environmentsAPI) setFollow(ctx context.Context, repoID string, v environment.View, on bool, by string) error {
	if !on {
		return h.store.Environments.StopFollow(ctx, repoID)
	}
	return h.store.Environments.SetFollow(ctx, store.EnvironmentFollow{RepoID: repoID, Path: v.Draft.SourcePath, UserID: by})
}

// follows is the path of the devcontainer.json the Repo follows, "" for
// none.
func (h environmentsAPI) follows(ctx context.Context, repoID string) (string, error) {
	f, err := h.store.Environments.Follow(ctx, repoID)
	if errors.Is(err, errdefs.ErrNotFound) {
		return "", nil
	}
	return f.Path, err
}

// devcontainerFollow makes the drafts of the Repos that follow their
// devcontainer.json as pushes change it.
type devcontainerFollow struct {
	environmentsAPI
	notify *notify.Notifier
	masks  *masks.Sets
}

// pushed: a push to the Repo's default branch that changed the file it
// follows makes a new draft from the file and starts its Test build, as
// the Member who turned follow on while they still have push; nothing is
// applied. The Repo's Members with push are told, of a file kndl refused
// too.
func (h devcontainerFollow) pushed(ctx context.Context, repo store.Repo, commit string, changed []string) error {
	f, err := h.store.Environments.Follow(ctx, repo.ID)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return nil
	case err != nil:
		return err
	case changed != nil && !slices.Contains(changed, f.Path):
		return nil
	}
	by, err := h.store.Members.UserByID(ctx, f.UserID)
	if err != nil || !h.guard.canPush(ctx, by, repo.URL) {
		return fmt.Errorf("the follow of %s's %s is its Member %s's, who no longer has push there: turn it on again: %v", repo.URL, f.Path, f.UserID, err)
	}
	text := fmt.Sprintf("A push (%.12s) changed %s: a new draft of the Environment waits; apply it once its Test build passes (kndl env apply).", commit, f.Path)
	v, err := h.draftFromDevcontainer(ctx, repo.ID, repo.URL, f.Path, by.ID)
	switch {
	case err != nil:
		text = fmt.Sprintf("A push (%.12s) changed %s, and no draft was made of it: %v", commit, f.Path, err)
	case v.Draft.NeedsTest:
		if _, err = h.envs.Test(ctx, repo, by.ID); err != nil {
			text = fmt.Sprintf("A push (%.12s) changed %s: a new draft of the Environment waits, and its Test build did not start (%v): run kndl env test.", commit, f.Path, err)
		}
	}
	ms, lerr := h.store.Members.List(ctx)
	var to []string
	for _, m := range ms {
		if h.guard.canPush(ctx, m, repo.URL) {
			to = append(to, m.ID)
		}
	}
	page := strings.TrimSuffix(h.cfg.PublicURL, "/") + "/repos/" + repo.ID
	nerr := h.notify.Repo(ctx, repo.URL, "Environment of "+repo.Name, page, to, notify.EnvironmentDraft, h.masks.RepoText(ctx, repo.ID, text))
	return errors.Join(err, lerr, nerr)
}

// draftFromDevcontainer reads the file at path (or the usual places) and
// makes the Repo's draft from it, by by.
func (h environmentsAPI) draftFromDevcontainer(ctx context.Context, repoID, repoURL, path, by string) (environment.View, error) {
	fg := h.forge()
	f, ok := fg.(forge.Files)
	if !ok {
		return environment.View{}, fmt.Errorf("this Hub reads a Repo's files through GitHub's App, and has none (GITHUB_APP_ID): %w", errdefs.ErrNotFound)
	}
	owner, name, ok := fg.ParseRepo(repoURL)
	if !ok {
		return environment.View{}, fmt.Errorf("the Repo %s is not on %s: %w", repoURL, h.cfg.GitHubURL, errdefs.ErrNotFound)
	}
	paths := devcontainerPaths
	if path != "" {
		paths = []string{path}
	}
	var b []byte
	var commit string
	var err error
	for _, path = range paths {
		if b, commit, err = f.FileAt(ctx, owner, name, path, devcontainer.MaxFile); !errors.Is(err, errdefs.ErrNotFound) {
			break
		}
	}
	if errors.Is(err, errdefs.ErrNotFound) {
		// The Repo is there: a file it lacks is the request's fault, not
		// a thing the caller may not see.
		return environment.View{}, fmt.Errorf("read %s: %v: name the file with --from-devcontainer=PATH: %w", strings.Join(paths, ", then "), err, errdefs.ErrInvalid)
	}
	if err != nil {
		return environment.View{}, fmt.Errorf("read %s: %w", strings.Join(paths, ", then "), err)
	}
	d, err := devcontainer.Read(ctx, b, devcontainer.Sources{Feature: h.fetchFeature, ImageEnv: h.imageEnv, Unset: unsetFromFile})
	if err != nil {
		return environment.View{}, fmt.Errorf("%s at %.12s: %w", path, commit, err)
	}
	cur, err := h.envs.Show(ctx, repoID)
	if err != nil {
		return environment.View{}, err
	}
	c := cur.Current.Settings
	c.Image, c.Bootstrap, c.Start, c.CPUs, c.MemoryMiB = d.Config.Image, d.Config.Bootstrap, d.Config.Start, d.Config.CPUs, d.Config.MemoryMiB
	c.Features, c.Ports, c.ContainerEnv, c.User = d.Config.Features, d.Config.Ports, d.Config.ContainerEnv, d.Config.User
	vars, notes := fileVariables(d.Variables)
	notes = append(append(d.Notes, notes...), besides(d)...)
	return h.envs.EditFrom(ctx, repoID, c, by, environment.Source{Path: path, Commit: commit, Notes: notes, Variables: vars})
}

// fileVariables are the Variables a draft proposes of the file's
// containerEnv and remoteEnv, with a note naming them; applying the draft
// sets them as store.FilePlan says.
func fileVariables(vars []devcontainer.Variable) ([]store.FileVariable, []string) {
	if len(vars) == 0 {
		return nil, nil
	}
	out := make([]store.FileVariable, 0, len(vars))
	var names []string
	for _, v := range vars {
		out = append(out, store.FileVariable{Name: v.Name, Value: v.Value})
		names = append(names, v.Name)
	}
	return out, []string{fmt.Sprintf("containerEnv, remoteEnv: %s become the Repo's Variables, not Sensitive, when the draft is applied; never over a Sensitive Variable, one a person set or a linked Shared one", strings.Join(names, ", "))}
}

// unsetFromFile says why the file sets no Variable named name: one the
// Sandbox sets itself (sandboxOwn), or one only a person sets, on purpose
// (loadscode).
func unsetFromFile(name string) string {
	if sandboxOwnError(name) != nil {
		return fmt.Sprintf("the Sandbox sets %s itself, from its login environment (the Bootstrap script adds to PATH in ~/.profile)", strings.Join(sandboxOwn, ", "))
	}
	if r, ok := loadscode.Match(name); ok {
		return fmt.Sprintf("it falls under %s, which changes how a tool loads code or reaches the network, so only a person sets it, on purpose: kndl var set --loads-code", r.Pattern)
	}
	return ""
}

// fetchFeature pulls a Feature's artifact for its metadata through the
// Hub's outbound rules (HUB_OUTBOUND_ALLOW); the Runner pulls it again by
// digest, through its own, to install it.
func (h environmentsAPI) fetchFeature(ctx context.Context, ref string) (string, []byte, error) {
	return ociimage.Artifact(ctx, ref, protocol.MaxFeatureLayer, ociimage.Options{Transport: h.cfg.Outbound.Transport()})
}

// imageEnv reads an image's environment through the Hub's outbound rules,
// as fetchFeature does, for a ${containerEnv:…} the file names.
func (h environmentsAPI) imageEnv(ctx context.Context, ref string) ([]string, error) {
	return ociimage.Env(ctx, ref, ociimage.Options{Transport: h.cfg.Outbound.Transport()})
}

// besides notes what a draft makes of the file beside its settings: the
// Features' order.
func besides(d devcontainer.Draft) []string {
	var notes []string
	if len(d.Features) > 0 {
		var ids []string
		for _, f := range d.Features {
			ids = append(ids, f.ID)
		}
		notes = append(notes, "features: installed in the Build in this order: "+strings.Join(ids, ", "))
	}
	return notes
}
