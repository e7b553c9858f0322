package session

import (
	"context"

	"kndl.dev/kndl/internal/egress"
	"kndl.dev/kndl/internal/protocol"
)

// Egress has an awake Session's Runner judge its restricted Sandbox by the
// allowlist p from its next connection (session.egress); the Runner
// refuses a switch between open and allowlist, which applies at the next
// wake.
func (o *Owner) Egress(ctx context.Context, id string, p egress.Policy) error {
	rc, err := o.runnerOfActive(ctx, id, "")
	if err != nil {
		return err
	}
	return rc.Request(ctx, protocol.TypeSessionEgress, protocol.SessionEgress{SessionID: id, Egress: p}, nil)
}
