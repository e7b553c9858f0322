package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub/runners"
	"kndl.dev/kndl/internal/metrics"
	"kndl.dev/kndl/internal/protocol"
)

// handlePool keeps what a Runner says its warm pool holds, for /metrics.
func handlePool(rc *runners.Conn, welcomed <-chan struct{}) {
	rc.Conn.Handle(protocol.TypeRunnerPool, true, func(ctx context.Context, body json.RawMessage) (any, error) {
		select {
		case <-welcomed:
		default:
			return nil, fmt.Errorf("say hello first: %w", errdefs.ErrInvalid)
		}
		var m protocol.RunnerPool
		if err := json.Unmarshal(body, &m); err != nil || m.Ready < 0 || m.MemoryMiB < 0 {
			return nil, fmt.Errorf("malformed body: want counts of 0 or more: %w", errdefs.ErrInvalid)
		}
		rc.Pool.Store(&m)
		return nil, nil
	})
}

// warmPools is each connected Runner's warm pool, by name, as it last said.
func (h *Hub) warmPools() []metrics.Pool {
	var out []metrics.Pool
	for _, rc := range h.runners.All() {
		if p := rc.Pool.Load(); p != nil {
			out = append(out, metrics.Pool{Runner: rc.Runner.Name, Ready: p.Ready, MemoryMiB: p.MemoryMiB})
		}
	}
	return out
}
