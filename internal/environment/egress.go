package environment

import (
	"context"
	"fmt"
	"slices"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
)

// An applied version's egress is not a build input, and reaches an awake
// Session at once where it can: an allowlist's hosts changed swap in its
// Runner's egress gate (session.egress). A switch between open and
// allowlist changes the Sandbox's network rules, which are set as it boots,
// so it applies at the Session's next wake, as the version's other changes
// do.

// SwapEgress asks an awake Session's Runner to judge its Sandbox by p from
// now (session.Owner.Egress).
type SwapEgress func(ctx context.Context, sessionID string, p egress.Policy) error

// EgressNow takes an applied version's egress to the awake Sessions of its
// Repo (ids), and returns the note each Session's history gets: that the
// allowlist applies now, or at the next wake and why. A Session that runs
// on applied but for its egress runs on applied from the swap. A version
// that leaves egress as the one before it had gives no notes.
func (s *Service) EgressNow(ctx context.Context, applied Version, ids []string, swap SwapEgress) (map[string]string, error) {
	before, err := s.version(ctx, applied.RepoID, applied.Version-1)
	if err != nil {
		return nil, err
	}
	to := applied.Settings.Egress
	if api.EgressLine(before.Settings.Egress) == api.EgressLine(to) {
		return nil, nil
	}
	notes := map[string]string{}
	for _, id := range ids {
		on, err := s.d.Store.SessionEnvironment(ctx, id)
		if err != nil {
			return notes, err
		}
		// The Sandbox's mode is its version's: a swap never changes it.
		v, err := s.version(ctx, applied.RepoID, on)
		if err != nil {
			return notes, err
		}
		switch from := v.Settings.Egress; {
		case !from.Restricted() && !to.Restricted():
			continue
		case from.Restricted() != to.Restricted():
			notes[id] = fmt.Sprintf("egress: Environment version %d's %s applies at the next wake: a switch between open and allowlist changes the Sandbox's network rules, set as it boots",
				applied.Version, api.EgressLine(to))
			continue
		}
		if err := swap(ctx, id, to); err != nil {
			notes[id] = fmt.Sprintf("egress: Environment version %d's %s applies at the next wake: the Runner did not take it now (%v)", applied.Version, api.EgressLine(to), err)
			continue
		}
		notes[id] = fmt.Sprintf("egress: Environment version %d's %s applies now", applied.Version, api.EgressLine(to))
		rest := v.Settings
		rest.Egress = to
		if len(Changes(rest, applied.Settings)) == 0 {
			if err := s.d.Store.SetSessionEnvironment(ctx, id, applied.Version); err != nil {
				return notes, err
			}
		}
	}
	return notes, nil
}

// Allow makes host, one the Repo's allowlist refused a Session, part of
// its allowlist as a version of its own: the draft kndl env edit --allow
// makes from the current version, applied as kndl env apply does. The
// caller takes it to the awake Sessions (EgressNow). It refuses, changing
// nothing, while the Repo has a draft (applying it would apply someone's
// unfinished changes with the host), when egress is open, when the list
// has host already, and when a Variable available at build changed since
// the current version (any new version needs a Test build then).
func (s *Service) Allow(ctx context.Context, repoID, host, by string) (Version, error) {
	if err := egress.CheckHost(host); err != nil {
		return Version{}, err
	}
	v, err := s.Show(ctx, repoID)
	if err != nil {
		return Version{}, err
	}
	cur := v.Current
	c := cur.Settings
	switch {
	case v.Draft != nil:
		return Version{}, fmt.Errorf("the Repo's Environment has a draft, which Allow would apply with %s: apply or finish the draft with kndl env, adding %s with --allow: %w",
			host, host, errdefs.ErrConflict)
	case !c.Egress.Restricted():
		return Version{}, fmt.Errorf("the Repo's egress is open now (version %d): every Session reaches %s from its next wake: %w", cur.Version, host, errdefs.ErrConflict)
	case c.Egress.Matcher().Allows(host):
		return Version{}, fmt.Errorf("%s is on the Repo's allowlist already (version %d): %w", host, cur.Version, errdefs.ErrConflict)
	}
	_, vars, err := s.atBuild(ctx, repoID)
	if err != nil {
		return Version{}, err
	}
	if c.BuildDigest(vars) != cur.buildBase(vars) {
		return Version{}, fmt.Errorf("a Variable available at build changed since version %d, so its next version needs a Test build: kndl env edit --allow, kndl env test, kndl env apply: %w",
			cur.Version, errdefs.ErrConflict)
	}
	c.Egress.Allow = append(slices.Clone(c.Egress.Allow), host)
	if _, err := s.Edit(ctx, repoID, c, by); err != nil {
		return Version{}, err
	}
	return s.Apply(ctx, repoID, by)
}

// version returns one of a Repo's versions, version 0 the Runner's
// defaults.
func (s *Service) version(ctx context.Context, repoID string, n int) (Version, error) {
	if n == 0 {
		return Version{}, nil
	}
	v, err := s.d.Store.EnvironmentVersion(ctx, repoID, n)
	if err != nil {
		return Version{}, err
	}
	c, err := Parse([]byte(v.Config))
	return Version{v, c}, err
}
