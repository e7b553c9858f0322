package daemon

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/store"
)

// openHub opens the Hub's store and makes the Hub.
func openHub(ctx context.Context, io cli.IO, dir string) (*hub.Hub, *store.Store, error) {
	cfg := hub.FromEnv(io.Getenv, dir)
	cfg.Logger = logger(io)
	st, err := store.Open(ctx, cfg.DatabasePath)
	if err != nil {
		return nil, nil, err
	}
	h, err := hub.New(cfg, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return h, st, nil
}

func listen(h *hub.Hub) (net.Listener, error) {
	ln, err := net.Listen("tcp", h.Config().Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (set HUB_LISTEN to another address)", h.Config().Listen, err)
	}
	return ln, nil
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
	ln, err := listen(h)
	if err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "kndl hub: serving %s on %s\n", h.Config().PublicURL, ln.Addr())
	link, err := h.SetupLink(ctx)
	if err != nil {
		return err
	}
	if link != "" {
		fmt.Fprintf(io.Stdout, "\nThis Hub has no Owner yet. Open this Setup link to become it (it works once, and a restart makes a new one):\n\n  %s\n\n", link)
	}
	return h.Serve(ctx, ln)
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
	st, err := store.Open(ctx, cfg.DatabasePath)
	if err != nil {
		return err
	}
	defer st.Close()
	rn, token, err := st.CreateRunner(ctx, *name, "")
	if err != nil {
		return err
	}
	if err := hub.AuditOnHubMachine(ctx, st, logger(io), hub.AuditRunnerPaired, rn.Name, "Runner "+rn.ID+", with kndl runner token create"); err != nil {
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
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" || fs.NArg() > 0 {
		return cli.ErrUsage
	}
	dir, err := home(io)
	if err != nil {
		return err
	}
	cfg := hub.FromEnv(io.Getenv, dir)
	st, err := store.Open(ctx, cfg.DatabasePath)
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	if err := st.Backup(ctx, *to); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Backed up %s to %s in %s. A Hub runs on it with HUB_DATABASE_PATH naming it and the same HUB_SECRETS_KEY.\n",
		cfg.DatabasePath, *to, time.Since(start).Round(time.Millisecond))
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
	dir, err := home(io)
	if err != nil {
		return err
	}
	cfg := hub.FromEnv(io.Getenv, dir)
	st, err := store.Open(ctx, cfg.DatabasePath)
	if err != nil {
		return err
	}
	defer st.Close()
	if *revoke {
		if err := st.RevokeMetricsToken(ctx); err != nil {
			return err
		}
		if err := hub.AuditOnHubMachine(ctx, st, logger(io), hub.AuditMetricsRevoked, "the metrics token", "with kndl hub metrics-token --revoke"); err != nil {
			return err
		}
		fmt.Fprintln(io.Stdout, "Revoked the metrics token: /metrics answers 401 to it from now on.")
		return nil
	}
	token, err := st.CreateMetricsToken(ctx)
	if err != nil {
		return err
	}
	if err := hub.AuditOnHubMachine(ctx, st, logger(io), hub.AuditMetricsMade, "the metrics token", "with kndl hub metrics-token; the one before, if any, ended"); err != nil {
		return err
	}
	fmt.Fprintf(io.Stdout, "Made the metrics token; the one before, if any, no longer works. It is shown only this once:\n\n  %s\n\n"+
		"Have Prometheus send it as a bearer token (authorization: {credentials: ...}) to %s/metrics.\n",
		token, strings.TrimSuffix(cfg.PublicURL, "/"))
	return nil
}
