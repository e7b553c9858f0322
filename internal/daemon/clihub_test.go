package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/apiclient"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
)

// The commands a person runs against a real Hub over its API, in this
// process: what needs neither a Runner's Sandbox nor Claude Code (moved
// from tests/e2e; docs/testing.md).

// cliHub is a real Hub over a real store, served on loopback, with this
// test's CLI signed in as its dev user.
type cliHub struct {
	t     *testing.T
	store *store.Store
	url   string
}

func newCLIHub(t *testing.T) *cliHub {
	t.Helper()
	st := storetest.Open(t)
	h, err := hub.New(hub.Config{Listen: "127.0.0.1:0", SecretsKey: seal.NewKey(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)
	ctx := context.Background()
	dev, err := st.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := st.Signins.CreateCLIToken(ctx, dev.ID, "test")
	if err != nil {
		t.Fatal(err)
	}
	// The dev user's Claude setup token, so kndl new gets past it.
	if err := h.StoreClaudeToken(ctx, dev.ID, "sk-ant-oat01-cli-test-token-0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KNDL_CONFIG", filepath.Join(t.TempDir(), "cli.json"))
	if err := apiclient.SaveConfig(apiclient.Config{HubURL: srv.URL, Token: tok}); err != nil {
		t.Fatal(err)
	}
	return &cliHub{t: t, store: st, url: srv.URL}
}

// kndl runs a kndl command against the Hub, stdin its input, and returns
// its stdout, stderr and exit code.
func (c *cliHub) kndl(stdin string, args ...string) (string, string, int) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.IO{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv: func(string) string { return "" }}, Commands()...)
	return out.String(), errOut.String(), code
}

// repo is a git repository with one commit, as a Session's Repo.
func (c *cliHub) repo() string {
	c.t.Helper()
	dir := filepath.Join(c.t.TempDir(), "repo")
	if out, err := exec.Command("git", "init", "-q", "-b", "main", dir).CombinedOutput(); err != nil {
		c.t.Fatalf("git init: %v %s", err, out)
	}
	if out, err := exec.Command("git", "-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "first").CombinedOutput(); err != nil {
		c.t.Fatalf("git commit: %v %s", err, out)
	}
	return dir
}

// runnerOffering connects a Runner to the Hub, as the dev user's, whose
// hello offers table: a Runner's protocol end with no Sandbox behind it.
func (c *cliHub) runnerOffering(table claude.Table) {
	c.t.Helper()
	ctx := context.Background()
	dev, _ := c.store.Members.DevUser(ctx)
	_, token, err := c.store.Runners.CreateRunner(ctx, "r1", dev.ID)
	if err != nil {
		c.t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, testenv.WaitShort)
	defer cancel()
	ws, _, err := websocket.Dial(dctx, "ws"+strings.TrimPrefix(c.url, "http")+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		c.t.Fatal(err)
	}
	conn := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
	go conn.Serve(ctx)
	c.t.Cleanup(func() { conn.Close(websocket.StatusNormalClosure, "test over") })
	hello := protocol.Hello{MinVersion: 1, MaxVersion: protocol.Version, Models: table, Name: "r1"}
	if err := conn.Request(ctx, protocol.TypeHello, hello, nil); err != nil {
		c.t.Fatalf("hello: %v", err)
	}
}

// TestKndlRepoEditSetsOneLimitAndKeepsTheOther: kndl repo edit sets the
// limits given, shows them with none, and refuses one out of bounds.
func TestKndlRepoEditSetsOneLimitAndKeepsTheOther(t *testing.T) {
	c := newCLIHub(t)
	repo := c.repo()
	out, errOut, code := c.kndl("", "repo", "edit", "--repo", repo)
	if code != 0 || !strings.Contains(out, "at most 20 Turns and at most 2 hours awake") {
		t.Fatalf("repo edit with no limit: %d %q %q, want the defaults shown", code, out, errOut)
	}
	if out, errOut, code = c.kndl("", "repo", "edit", "--repo", repo, "--max-turns", "5"); code != 0 || !strings.Contains(out, "at most 5 Turns and at most 2 hours") {
		t.Fatalf("repo edit --max-turns 5: %d %q %q", code, out, errOut)
	}
	if out, errOut, code = c.kndl("", "repo", "edit", "--repo", repo, "--max-turn-hours", "0", "--json"); code != 0 || !strings.Contains(out, `"max_turns": 5`) || !strings.Contains(out, `"max_turn_hours": 0`) {
		t.Fatalf("repo edit --max-turn-hours 0 --json: %d %q %q", code, out, errOut)
	}
	if _, errOut, code = c.kndl("", "repo", "edit", "--repo", repo, "--max-turns", "-1"); code == 0 || !strings.Contains(errOut, "0 (no limit)") {
		t.Fatalf("repo edit --max-turns -1: exit %d %q, want refused saying the bounds", code, errOut)
	}
}

// TestCLISetsVariablesWriteOnly: kndl var set takes a Sensitive value from
// stdin, and var ls never shows it; a value too short to be found, and a
// Repo Variable named as a linked Shared one, are refused saying why.
func TestCLISetsVariablesWriteOnly(t *testing.T) {
	c := newCLIHub(t)
	repo := c.repo()
	const secret = "cli-s3cret-value"
	if _, errOut, code := c.kndl(secret+"\n", "var", "set", "--repo", repo, "--sensitive", "API_KEY"); code != 0 {
		t.Fatalf("var set: %d %s", code, errOut)
	}
	if _, errOut, code := c.kndl("plain\n", "var", "set", "--shared", "COLOR"); code != 0 {
		t.Fatalf("var set --shared: %d %s", code, errOut)
	}
	if _, errOut, code := c.kndl("", "var", "link", "--repo", repo, "COLOR"); code != 0 {
		t.Fatalf("var link: %d %s", code, errOut)
	}
	out, _, code := c.kndl("", "var", "ls", "--repo", repo)
	if code != 0 || strings.Contains(out, secret) || !strings.Contains(out, "(sensitive)") || !strings.Contains(out, "COLOR (linked)") || !strings.Contains(out, "plain") {
		t.Fatalf("var ls: %d\n%s", code, out)
	}
	// Too short to be found reliably: refused, with the reason.
	if _, errOut, code := c.kndl("abc\n", "var", "set", "--repo", repo, "--sensitive", "SHORT"); code == 0 || !strings.Contains(errOut, "4") {
		t.Fatalf("a 3-character Sensitive value: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.kndl("x\n", "var", "set", "--repo", repo, "COLOR"); code == 0 || !strings.Contains(errOut, "links a Shared variable") {
		t.Fatalf("a Repo Variable named as a linked one: exit %d, %q", code, errOut)
	}
	if _, errOut, code := c.kndl("", "var", "rm", "--repo", repo, "API_KEY"); code != 0 {
		t.Fatalf("var rm: %d %s", code, errOut)
	}
}

// TestKndlNewRefusesAModelTheRunnersDontOfferNamingThem: kndl new with a
// model no Runner offers fails at once naming the models offered, and
// makes no Session; kndl models lists the same.
func TestKndlNewRefusesAModelTheRunnersDontOfferNamingThem(t *testing.T) {
	c := newCLIHub(t)
	c.runnerOffering(claude.Models())
	_, errOut, code := c.kndl("", "new", "--repo", c.repo(), "--model", "no-such-model", "hello")
	if code == 0 {
		t.Fatal("kndl new --model no-such-model succeeded")
	}
	out, _, listed := c.kndl("", "models")
	for _, m := range claude.Models().Models {
		if !strings.Contains(errOut, m.Alias+" ("+m.ID+")") {
			t.Errorf("kndl new says %q, want it to name %s", errOut, m.Alias)
		}
		if listed != 0 || !strings.Contains(out, m.Alias) || !strings.Contains(out, m.ID) {
			t.Errorf("kndl models: exit %d\n%s\nwant %s listed", listed, out, m.Alias)
		}
	}
	if ss, err := c.store.Sessions.List(context.Background(), store.SessionFilter{}); err != nil || len(ss) != 0 {
		t.Fatalf("%d Sessions stored (%v), want none", len(ss), err)
	}
}
