package session

import (
	"context"
	"fmt"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
)

// Egress has an awake Session's Runner judge its restricted Sandbox by the
// allowlist p from its next connection (session.egress); the Runner
// refuses a switch between open and allowlist, which applies at the next
// wake.
func (o *Owner) Egress(ctx context.Context, id string, p egress.Policy) error {
	s, err := o.store.SessionByID(ctx, id)
	if err != nil {
		return err
	}
	if s.State != Active {
		return fmt.Errorf("the Session is %s, not active: %w", s.State, errdefs.ErrConflict)
	}
	rc := o.opts.Runners.Runner(s.RunnerID)
	if rc == nil {
		return fmt.Errorf("the Session's Runner is not connected: %w", errdefs.ErrUnavailable)
	}
	return rc.Request(ctx, protocol.TypeSessionEgress, protocol.SessionEgress{SessionID: id, Egress: p}, nil)
}
