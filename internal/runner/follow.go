package runner

import "context"

// follow will tail the Session's transcript into Events once
// internal/transcript lands; until then only the mod's hooks make Events.
func (r *Runner) follow(ctx context.Context, s *session) {
	r.log.Warn("this build does not tail transcripts yet: only hook Events are recorded", "session", s.id)
}
