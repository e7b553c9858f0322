package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/store"
)

// heldStore is a Hub's store with its lease, held until Close: one Hub per
// store (store.Lease).
type heldStore struct {
	*store.Store
	lease *store.Lease
}

// holdStore takes the lease on the store cfg names, waiting as a standby
// while another Hub holds it (it says so in log, and listens on nothing),
// and then opens the store: migrations, recovering Sessions and serving
// all come after the lease.
func holdStore(ctx context.Context, cfg hub.Config, log *slog.Logger) (heldStore, error) {
	src, err := cfg.Database()
	if err != nil {
		return heldStore{}, err
	}
	what := cfg.DatabasePath
	if store.IsPostgres(src) {
		what = "the PostgreSQL database at HUB_DATABASE_URL" // not the URL: it may hold a password
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("kndl hub, pid %d on %s, since %s", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	waited := false
	lease, err := store.WaitLease(ctx, src, who, func(holder string) {
		waited = true
		log.Warn("another Hub holds this store: waiting as a standby, listening on nothing, trying again every "+store.LeaseRetry.String()+" to take over when it ends",
			"store", what, "holder", holder)
	})
	if err != nil {
		return heldStore{}, fmt.Errorf("the lease on %s: %w", what, err)
	}
	if waited {
		log.Info("took over the store: the Hub that held it has ended", "store", what)
	}
	st, err := store.Open(ctx, src)
	if err != nil {
		lease.Release()
		return heldStore{}, err
	}
	return heldStore{st, lease}, nil
}

// Close closes the store, then ends the lease for a standby to take.
func (s heldStore) Close() error {
	return errors.Join(s.Store.Close(), s.lease.Release())
}

// errLeaseLost is why a Hub stops when its lease ends under it.
var errLeaseLost = errors.New("this Hub's lease on its store ended (its PostgreSQL connection broke), so a standby Hub may now run on the store: this one stops; start it again and it waits as a standby")

// whileLeased is ctx, ended with errLeaseLost if the lease ends under the
// Hub, and by stop.
func (s heldStore) whileLeased(ctx context.Context) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-s.lease.Lost():
			cancel(errLeaseLost)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

// leaseLost returns errLeaseLost if that is why ctx, from whileLeased,
// ended, and else err.
func leaseLost(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); errors.Is(cause, errLeaseLost) {
		return cause
	}
	return err
}
