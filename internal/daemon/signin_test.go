package daemon

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/auth"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
)

// TestKndlDevSignsItsCLIInAtEachStart: starting kndl dev counts as a
// sign-in for this machine's CLI, the token it had kept, so kndl token set
// and kndl invite work for HUB_SUDO_MAX_AGE after each start.
func TestKndlDevSignsItsCLIInAtEachStart(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	t.Setenv("KNDL_CONFIG", filepath.Join(t.TempDir(), "cli.json"))
	dev, _ := st.Members.DevUser(ctx)
	const url = "http://127.0.0.1:7380"
	token, hash := auth.NewToken(auth.CLI)
	if err := st.Members.AddCLIToken(ctx, dev.ID, "kndl dev", hash, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := apiclient.SaveConfig(apiclient.Config{HubURL: url, Token: token}); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	if err := devSignIn(ctx, st, dev, url); err != nil {
		t.Fatal(err)
	}
	cfg, _ := apiclient.LoadConfig()
	at, err := st.Signins.SignedInAt(ctx, hash)
	if cfg.Token != token || err != nil || at.Before(start) {
		t.Fatalf("after a start: token kept %v, signed in at %v (%v), want the same token signed in now", cfg.Token == token, at, err)
	}
}

// TestRunnerTokenCreateIsAudited: a Runner paired on the Hub's machine is
// in the audit log as the Hub's machine's act, without its token.
func TestRunnerTokenCreateIsAudited(t *testing.T) {
	home := t.TempDir()
	var out, errOut bytes.Buffer
	env := map[string]string{"KNDL_HOME": home, "KNDL_LOG_LEVEL": "error", "HUB_SECRETS_KEY": seal.NewKey()}
	code := cli.Run(context.Background(), []string{"runner", "token", "create", "--name", "box-1"}, cli.IO{Stdout: &out, Stderr: &errOut,
		Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}, Commands()...)
	if code != 0 {
		t.Fatalf("kndl runner token create: %d %s", code, errOut.String())
	}
	st, err := store.Open(context.Background(), filepath.Join(home, "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	es, err := st.Audit.AuditEntries(context.Background(), 0, 10)
	if err != nil || len(es) != 1 || es[0].Action != "runner.paired" || es[0].Target != "box-1" || es[0].Via != "hub" {
		t.Fatalf("audit log %+v (%v), want box-1 paired on the Hub's machine", es, err)
	}
	if token := regexp.MustCompile(`kndlr_\S+`).FindString(out.String()); token == "" || strings.Contains(es[0].Detail+es[0].Target, token) {
		t.Fatalf("output %q / entry %+v: want a Runner token printed and not recorded", out.String(), es[0])
	}
}

// TestHubMetricsTokenReplacesAndRevokesAndIsAudited: kndl hub metrics-token
// prints a metrics token once, which the store then takes; a second one ends
// the first, --revoke ends it, and each is audited without the token.
func TestHubMetricsTokenReplacesAndRevokesAndIsAudited(t *testing.T) {
	home := t.TempDir()
	env := map[string]string{"KNDL_HOME": home, "KNDL_LOG_LEVEL": "error", "HUB_SECRETS_KEY": seal.NewKey()}
	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := cli.Run(context.Background(), append([]string{"hub", "metrics-token"}, args...), cli.IO{Stdout: &out, Stderr: &errOut,
			Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}, Commands()...)
		if code != 0 {
			t.Fatalf("kndl hub metrics-token %v: %d %s", args, code, errOut.String())
		}
		return out.String()
	}
	tokenIn := func(out string) string {
		t.Helper()
		tok := regexp.MustCompile(`kndlp_\S+`).FindString(out)
		if tok == "" {
			t.Fatalf("output %q: want a metrics token", out)
		}
		return tok
	}
	first := tokenIn(run())
	second := tokenIn(run())
	st, err := store.Open(context.Background(), filepath.Join(home, "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if err := st.Signins.CheckMetricsToken(ctx, first); err == nil {
		t.Error("the first metrics token still works after a second was made")
	}
	if err := st.Signins.CheckMetricsToken(ctx, second); err != nil {
		t.Errorf("the new metrics token: %v, want it to work", err)
	}
	run("--revoke")
	if err := st.Signins.CheckMetricsToken(ctx, second); err == nil {
		t.Error("the metrics token still works after --revoke")
	}
	es, err := st.Audit.AuditEntries(ctx, 0, 10)
	if err != nil || len(es) != 3 {
		t.Fatalf("audit log %+v (%v), want 3 entries", es, err)
	}
	for i, want := range []string{"metrics_token.revoked", "metrics_token.made", "metrics_token.made"} { // newest first
		e := es[i]
		if e.Action != want || e.Via != "hub" || strings.Contains(e.Detail+e.Target, "kndlp_") {
			t.Errorf("entry %d = %+v, want %s on the Hub's machine, no token", i, e, want)
		}
	}
}

// TestActsOnTheHubMachineAreChainedWithKndlDevsKey: where kndl dev keeps
// its key in its home, kndl runner token create chains its entry with the
// audit key derived from it, so the dev Hub's chain holds; with no key at
// all, it refuses before pairing anything.
func TestActsOnTheHubMachineAreChainedWithKndlDevsKey(t *testing.T) {
	ctx := context.Background()
	pair := func(home string) (int, string) {
		var out, errOut bytes.Buffer
		env := map[string]string{"KNDL_HOME": home, "KNDL_LOG_LEVEL": "error"}
		code := cli.Run(ctx, []string{"runner", "token", "create", "--name", "box-1"}, cli.IO{Stdout: &out, Stderr: &errOut,
			Stdin: strings.NewReader(""), Getenv: func(k string) string { return env[k] }}, Commands()...)
		return code, errOut.String()
	}
	openStore := func(home string) *store.Store {
		st, err := store.Open(ctx, filepath.Join(home, "hub.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}

	dev := t.TempDir()
	k, err := devSecretsKey(dev, func(string) string { return "" }) // as kndl dev's first start makes it
	if err != nil {
		t.Fatal(err)
	}
	if code, errOut := pair(dev); code != 0 {
		t.Fatalf("kndl runner token create in kndl dev's home: %d %s", code, errOut)
	}
	key, _ := seal.ParseKey(k)
	c, err := openStore(dev).Audit.VerifyAudit(ctx, hub.AuditKey(key))
	if err != nil || c.Entries != 1 || c.BrokenAt != 0 {
		t.Fatalf("the chain under kndl dev's key: %+v, %v; want its one entry, whole", c, err)
	}

	none := t.TempDir()
	if code, errOut := pair(none); code == 0 || !strings.Contains(errOut, "HUB_SECRETS_KEY is not set") {
		t.Fatalf("kndl runner token create with no key: %d %s, want a refusal naming HUB_SECRETS_KEY", code, errOut)
	}
	if rs, err := openStore(none).Runners.List(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("Runners after the refusal: %+v, %v; want none paired", rs, err)
	}
}
