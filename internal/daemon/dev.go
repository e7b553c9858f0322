package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/runner"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// runDev runs a Hub and a Runner in one process on 127.0.0.1, with the
// store and the Runner's home under $KNDL_HOME, and signs this machine's
// CLI in as the dev user. The Runner reaches the Hub over its real
// WebSocket, as a remote one would.
func runDev(ctx context.Context, io cli.IO, args []string) error {
	if _, err := cli.Parse(cli.Flags(io, "dev"), args); err != nil {
		return err
	}
	dir, err := home(io)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("kndl dev runs Sandboxes with crun in user namespaces, which needs root: run it with sudo")
	}
	getenv := devEnv(io.Getenv, dir)
	key, err := devSecretsKey(dir, getenv)
	if err != nil {
		return err
	}
	hcfg := hub.FromEnv(getenv, dir)
	hcfg.SecretsKey, hcfg.DevLogin = key, true
	hcfg.Logger = logger(io)
	st, err := holdStore(ctx, hcfg, hcfg.Logger)
	if err != nil {
		return err
	}
	defer st.Close()
	h, err := hub.New(hcfg, st.Store)
	if err != nil {
		return err
	}
	defer h.Close()
	fr, err := listen(h)
	if err != nil {
		return err
	}
	defer fr.Close()
	url := h.Config().PublicURL

	dev, err := st.Members.DevUser(ctx)
	if err != nil {
		return err
	}
	if tok := io.Getenv("CLAUDE_CODE_OAUTH_TOKEN"); tok != "" {
		if err := h.StoreClaudeToken(ctx, dev.ID, tok); err != nil {
			return fmt.Errorf("CLAUDE_CODE_OAUTH_TOKEN: %w", err)
		}
	}
	if err := devSignIn(ctx, st.Store, dev, url); err != nil {
		return err
	}
	token, err := devRunnerToken(ctx, st.Store, dev)
	if err != nil {
		return err
	}
	rcfg, err := runner.FromEnv(getenv, dir)
	if err != nil {
		return err
	}
	rcfg.HubURL, rcfg.Token, rcfg.Name, rcfg.Logger = url, token, "dev", hcfg.Logger
	b, err := newBackend(ctx, rcfg, rcfg.Logger)
	if err != nil {
		return err
	}
	if rcfg.Builds, err = newBuildBackend(ctx, rcfg, b, rcfg.Logger); err != nil {
		return err
	}
	r, err := runner.New(rcfg, b)
	if err != nil {
		return err
	}

	ctx, cancel := st.whileLeased(ctx)
	defer cancel()
	errs := make(chan error, 2)
	fr.Start(ctx)
	go func() { errs <- h.Serve(ctx, fr.Listener()) }()
	go func() { errs <- r.Run(ctx) }()
	fmt.Fprintf(io.Stdout, "kndl dev: Hub at %s with a Runner named dev; this machine's kndl CLI is signed in as the dev user.\nIn a browser on this machine: %s/signin (dev login).\n", url, url)
	if io.Getenv("CLAUDE_CODE_OAUTH_TOKEN") == "" {
		if _, _, err := st.Members.UserSecret(ctx, dev.ID, "claude-token"); err != nil {
			fmt.Fprintln(io.Stdout, "No Claude setup token is stored yet: run claude setup-token, then kndl token set (or start kndl dev with CLAUDE_CODE_OAUTH_TOKEN set).")
		}
	}
	fmt.Fprintln(io.Stdout, `Start a Session with: kndl new --repo PATH_OR_URL "your first prompt"`)
	err = <-errs
	cancel()
	<-errs
	return leaseLost(ctx, err)
}

// devRunnerToken returns a fresh token for the dev Runner, pairing it on
// first start. The Runner keeps its id across restarts, clean or killed,
// so the Hub takes its running Sessions back; the token lives only in this
// process, and the one before it ends.
func devRunnerToken(ctx context.Context, st *store.Store, dev store.User) (string, error) {
	rn, err := st.Runners.RunnerByName(ctx, "dev")
	if errors.Is(err, errdefs.ErrNotFound) {
		_, token, err := st.Runners.CreateRunner(ctx, "dev", dev.ID)
		return token, err
	}
	if err != nil {
		return "", err
	}
	return st.Runners.RotateRunnerToken(ctx, rn.ID)
}

// devEnv gives kndl dev's defaults: everything under $KNDL_HOME, and the
// Hub's and Runner's own requests may reach loopback, since they are one
// machine's and its MCP servers, registries and Repos often are on it.
func devEnv(getenv func(string) string, dir string) func(string) string {
	return func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		switch k {
		case "RUNNER_HOME":
			return filepath.Join(dir, "runner")
		case "HUB_OUTBOUND_ALLOW", "RUNNER_OUTBOUND_ALLOW":
			return outbound.Loopback
		}
		return ""
	}
}

// devSecretsKey is HUB_SECRETS_KEY, or a key kndl dev keeps in its home,
// made at its first start.
func devSecretsKey(dir string, getenv func(string) string) (string, error) {
	k, err := secretsKey(dir, getenv)
	if err != nil || k != "" {
		return k, err
	}
	k = seal.NewKey()
	return k, os.WriteFile(devKeyPath(dir), []byte(k), 0o600)
}

// secretsKey is HUB_SECRETS_KEY, or else the key kndl dev keeps in its
// home if it made one; "" if neither.
func secretsKey(dir string, getenv func(string) string) (string, error) {
	if k := getenv("HUB_SECRETS_KEY"); k != "" {
		return k, nil
	}
	b, err := os.ReadFile(devKeyPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return string(b), err
}

func devKeyPath(dir string) string { return filepath.Join(dir, "secrets.key") }

// devSignIn points this machine's CLI at the dev Hub as the dev user: with
// the CLI token an earlier start gave it, or a fresh one. Starting kndl dev
// on this machine counts as signing in, so for HUB_SUDO_MAX_AGE the CLI may
// do what asks for a recent sign-in (kndl token set, kndl invite); later,
// kndl login approved with dev login, or a new start, signs it in afresh.
func devSignIn(ctx context.Context, st *store.Store, dev store.User, url string) error {
	if c, err := apiclient.LoadConfig(); err == nil && c.HubURL == url {
		if u, err := st.Signins.UserByCLIToken(ctx, c.Token); err == nil && u.ID == dev.ID {
			return st.Signins.SignInCLIToken(ctx, c.Token)
		}
	}
	tok, err := st.Signins.CreateCLIToken(ctx, dev.ID, "kndl dev")
	if err != nil {
		return err
	}
	return apiclient.SaveConfig(apiclient.Config{HubURL: url, Token: tok})
}
