package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/hub/front"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// storeOnThisMachine opens the store of the Hub this machine's environment
// configures, for the commands that work on it directly.
func storeOnThisMachine(ctx context.Context, io cli.IO) (*store.Store, hub.Config, error) {
	dir, err := home(io)
	if err != nil {
		return nil, hub.Config{}, err
	}
	cfg := hub.FromEnv(io.Getenv, dir)
	st, err := openStore(ctx, cfg)
	return st, cfg, err
}

// withAuditKey sets cfg.SecretsKey for a command that records an act in the
// audit log, which is chained with a key derived from it: HUB_SECRETS_KEY,
// or the key kndl dev keeps in its home. It is asked for before the act.
func withAuditKey(cfg *hub.Config, io cli.IO) error {
	dir, err := home(io)
	var k string
	if err == nil {
		k, err = secretsKey(dir, io.Getenv)
	}
	if err == nil && k == "" {
		err = errors.New("HUB_SECRETS_KEY is not set: this records the act in the audit log, which is chained with a key derived from it; run it with the Hub's HUB_SECRETS_KEY")
	}
	if err == nil {
		_, err = seal.ParseKey(k)
	}
	cfg.SecretsKey = k
	return err
}

// openStore opens the store cfg names: PostgreSQL at HUB_DATABASE_URL, or
// SQLite at HUB_DATABASE_PATH.
func openStore(ctx context.Context, cfg hub.Config) (*store.Store, error) {
	src, err := cfg.Database()
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, src)
}

// openHub takes the lease on the Hub's store (holdStore), opens it and
// makes the Hub.
func openHub(ctx context.Context, io cli.IO, dir string) (*hub.Hub, heldStore, error) {
	cfg := hub.FromEnv(io.Getenv, dir)
	cfg.Logger = logger(io)
	// Before the store is touched: a Hub that may not serve as set up
	// (plain HTTP beyond loopback, a setting malformed) takes no lease.
	if err := cfg.Check(); err != nil {
		return nil, heldStore{}, err
	}
	st, err := holdStore(ctx, cfg, cfg.Logger)
	if err != nil {
		return nil, heldStore{}, err
	}
	h, err := hub.New(cfg, st.Store)
	if err != nil {
		st.Close()
		return nil, heldStore{}, err
	}
	return h, st, nil
}

// listen opens the Hub's front: its address, with TLS if set up, and
// the plain-HTTP port that redirects to it; Close it.
func listen(h *hub.Hub) (*front.Front, error) {
	cfg := h.Config()
	pub, err := url.Parse(cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	return front.Open(cfg.Front, cfg.Listen, pub, cfg.Logger)
}

func runHub(ctx context.Context, io cli.IO, args []string) error {
	if err := cli.Flags(io, "hub").Parse(args); err != nil {
		return err
	}
	dir, err := home(io)
	if err != nil {
		return err
	}
	h, st, err := openHub(ctx, io, dir)
	if err != nil {
		return err
	}
	defer st.Close()
	defer h.Close()
	fr, err := listen(h)
	if err != nil {
		return err
	}
	defer fr.Close()
	fmt.Fprintf(io.Stdout, "kndl hub: serving %s on %s\nkndl hub: %s\n", h.Config().PublicURL, fr.Listener().Addr(), fr.Notice())
	link, err := h.SetupLink(ctx)
	if err != nil {
		return err
	}
	if link != "" {
		fmt.Fprintf(io.Stdout, "\nThis Hub has no Owner yet. Open this Setup link to become it (it works once, and a restart makes a new one):\n\n  %s\n\n", link)
	}
	ctx, stop := st.whileLeased(ctx)
	defer stop()
	fr.Start(ctx)
	return leaseLost(ctx, h.Serve(ctx, fr.Listener()))
}

func runnerTokenCreate(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "runner token create")
	name := fs.String("name", "", "the Runner's name (letters, digits, '.', '_', '-')")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || fs.NArg() > 0 {
		return cli.ErrUsage
	}
	dir, err := home(io)
	if err != nil {
		return err
	}
	cfg := hub.FromEnv(io.Getenv, dir)
	if err := cfg.Check(); err != nil {
		return err
	}
	if err := withAuditKey(&cfg, io); err != nil {
		return err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	rn, token, err := st.Runners.CreateRunner(ctx, *name, "")
	if err != nil {
		return err
	}
	if err := hub.AuditOnHubMachine(ctx, st.Audit, cfg.SecretsKey, logger(io), hub.AuditRunnerPaired, rn.Name, "Runner "+rn.ID+", with kndl runner token create"); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Paired Runner %s. Its token is shown only this once:\n\n  %s\n\nOn the Runner's machine, run:\n\n  RUNNER_TOKEN=%s KNDL_HUB_URL=%s kndl runner\n",
		rn.Name, token, token, cfg.PublicURL)
	return nil
}

// hubBackup copies the Hub's store to a new file while the Hub runs. The
// copy holds what the store does (sealed values sealed, token hashes):
// keep it as the store is kept, with HUB_SECRETS_KEY apart from it.
func hubBackup(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "hub backup")
	to := fs.String("to", "", "the new file to write")
	into := fs.String("into", "", "instead of --to: a folder, where the backup is a new file named for its time (UTC)")
	keep := fs.Int("keep", 0, "with --into: then remove the folder's oldest backups past this many")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if (*to == "") == (*into == "") || (*keep != 0 && *into == "") || *keep < 0 || fs.NArg() > 0 {
		return cli.ErrUsage
	}
	st, cfg, err := storeOnThisMachine(ctx, io)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	if *into != "" {
		if *to, err = backupInto(ctx, st, *into, start); err != nil {
			return err
		}
	} else if err := st.Backup(ctx, *to); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Backed up %s to %s in %s. A Hub runs on it with HUB_DATABASE_PATH naming it and the same HUB_SECRETS_KEY.\n",
		cfg.DatabasePath, *to, time.Since(start).Round(time.Millisecond))
	if *keep > 0 {
		removed, err := keepNewest(*into, *keep)
		if err != nil {
			return err
		}
		for _, r := range removed {
			fmt.Fprintf(io.Stdout, "Removed %s, past the newest %d.\n", r, *keep)
		}
	}
	return nil
}

// hubMetricsToken makes the Hub's metrics token, which a Prometheus scraper
// sends as a bearer token to /metrics and which reads nothing else; the one
// before stops working. --revoke ends it without a new one.
func hubMetricsToken(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "hub metrics-token")
	revoke := fs.Bool("revoke", false, "end the metrics token without making a new one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.ErrUsage
	}
	st, cfg, err := storeOnThisMachine(ctx, io)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := withAuditKey(&cfg, io); err != nil {
		return err
	}
	if *revoke {
		if err := st.Signins.RevokeMetricsToken(ctx); err != nil {
			return err
		}
		if err := hub.AuditOnHubMachine(ctx, st.Audit, cfg.SecretsKey, logger(io), hub.AuditMetricsRevoked, "the metrics token", "with kndl hub metrics-token --revoke"); err != nil {
			return err
		}
		fmt.Fprintln(io.Stdout, "Revoked the metrics token: /metrics answers 401 to it from now on.")
		return nil
	}
	token, err := st.Signins.CreateMetricsToken(ctx)
	if err != nil {
		return err
	}
	if err := hub.AuditOnHubMachine(ctx, st.Audit, cfg.SecretsKey, logger(io), hub.AuditMetricsMade, "the metrics token", "with kndl hub metrics-token; the one before, if any, ended"); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Made the metrics token; the one before, if any, no longer works. It is shown only this once:\n\n  %s\n\n"+
		"Have Prometheus send it as a bearer token (authorization: {credentials: ...}) to %s/metrics.\n",
		token, strings.TrimSuffix(cfg.PublicURL, "/"))
	return nil
}

// hubMigrateStore copies a SQLite Hub's store into a new PostgreSQL
// database, values as they are (sealed ones sealed, under the same
// HUB_SECRETS_KEY), and checks each table's count. Stop the Hub first.
func hubMigrateStore(ctx context.Context, io cli.IO, args []string) error {
	fs := cli.Flags(io, "hub migrate-store")
	from := fs.String("from", "", "the SQLite store to copy: sqlite:PATH")
	to := fs.String("to", "", "the new, empty PostgreSQL database: postgres://user:password@host:port/database")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		return cli.ErrUsage
	}
	path, ok := strings.CutPrefix(*from, "sqlite:")
	if !ok || path == "" {
		return fmt.Errorf("--from %q: want sqlite:PATH, the Hub's SQLite file (HUB_DATABASE_PATH)", *from)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if !store.IsPostgres(*to) {
		return errors.New("--to: want a PostgreSQL URL, postgres://user:password@host:port/database")
	}
	// A Hub running on it would go on writing what the copy misses.
	lease, holder, err := store.TryLease(ctx, path, "kndl hub migrate-store, pid "+strconv.Itoa(os.Getpid()))
	if err != nil {
		return err
	}
	if lease == nil {
		return fmt.Errorf("a Hub runs on %s (%s): stop it first, then copy", path, holder)
	}
	defer lease.Release()
	src, err := store.Open(ctx, path)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := store.Open(ctx, *to)
	if err != nil {
		return err
	}
	defer dst.Close()
	start := time.Now()
	counts, err := src.CopyTo(ctx, dst)
	if err != nil {
		return err
	}
	var rows int64
	for _, c := range counts {
		fmt.Fprintf(io.Stdout, "  %-24s %d rows\n", c.Table, c.Rows)
		rows += c.Rows
	}
	fmt.Fprintf(io.Stdout, "Copied %d rows in %d tables from %s to PostgreSQL in %s; each table's count checked. Start the Hub with HUB_DATABASE_URL naming that database and the same HUB_SECRETS_KEY.\n",
		rows, len(counts), path, time.Since(start).Round(time.Millisecond))
	return nil
}
