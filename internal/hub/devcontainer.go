package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/devcontainer"
	"kndl.dev/kndl/internal/environment"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/forge"
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
	h.reply(w, r, http.StatusOK, apiEnvironment(v), err)
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
	d, err := devcontainer.Read(ctx, b, noFeatures)
	if err != nil {
		return environment.View{}, fmt.Errorf("%s at %.12s: %w", path, commit, err)
	}
	cur, err := h.envs.Show(ctx, repoID)
	if err != nil {
		return environment.View{}, err
	}
	c := cur.Current.Settings
	c.Image, c.Bootstrap, c.Start, c.CPUs, c.MemoryMiB = d.Config.Image, d.Config.Bootstrap, d.Config.Start, d.Config.CPUs, d.Config.MemoryMiB
	return h.envs.EditFrom(ctx, repoID, c, by, environment.Source{Path: path, Commit: commit, Notes: append(d.Notes, besides(d)...)})
}

// noFeatures refuses Features: the Build does not install them yet.
func noFeatures(ctx context.Context, ref string) (string, []byte, error) {
	return "", nil, fmt.Errorf("kndl's Build does not install Features yet; install the tool in the image or in onCreateCommand: %w", errdefs.ErrInvalid)
}

// besides notes what a draft does not carry of the file: the Variables,
// ports and user it names, each with the way to have it.
func besides(d devcontainer.Draft) []string {
	var notes []string
	if len(d.Variables) > 0 {
		var names []string
		for _, v := range d.Variables {
			names = append(names, v.Name)
		}
		notes = append(notes, fmt.Sprintf("containerEnv, remoteEnv: %s are not set by a draft; set each with kndl var set", strings.Join(names, ", ")))
	}
	if len(d.Ports) > 0 {
		var ports []string
		for _, p := range d.Ports {
			ports = append(ports, strings.TrimSpace(fmt.Sprintf("%d %s", p.Port, p.Label)))
		}
		notes = append(notes, fmt.Sprintf("forwardPorts: %s; a Session's view offers the ports its Sandbox listens on", strings.Join(ports, ", ")))
	}
	if d.User != "" {
		notes = append(notes, fmt.Sprintf("remoteUser, containerUser: %s is not taken; Claude Code runs as the Sandbox's own user", d.User))
	}
	return notes
}
