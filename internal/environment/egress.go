package environment

import (
	"context"
	"fmt"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/egress"
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
