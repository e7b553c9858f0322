package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/cli"
	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

func TestMain(m *testing.M) {
	if args := os.Getenv(asKndl); args != "" {
		os.Exit(cli.Run(context.Background(), strings.Fields(args), cli.IO{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Getenv: os.Getenv}, Commands()...))
	}
	os.Exit(testenv.PostgresMain(m))
}

// kndl runs a command of Commands with env as its environment and returns
// its exit code, stdout and stderr.
func kndl(env map[string]string, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Run(context.Background(), args, cli.IO{Stdout: &out, Stderr: &errOut, Stdin: strings.NewReader(""),
		Getenv: func(k string) string { return env[k] }}, Commands()...)
	return code, out.String(), errOut.String()
}

// TestHubMigrateStoreCopiesAHubToPostgres: kndl hub migrate-store copies a
// SQLite Hub into PostgreSQL, where a Hub opening HUB_DATABASE_URL finds
// its Runners and Sessions; asked again, it refuses the database now
// holding rows, and the store of a Hub that runs; and kndl hub backup
// there says to use pg_dump.
func TestHubMigrateStoreCopiesAHubToPostgres(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hub.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := st.Members.DevUser(ctx)
	rn, _, _ := st.Runners.CreateRunner(ctx, "box", u.ID)
	repo, _ := st.Repos.EnsureRepo(ctx, "/srv/repo", "repo")
	x, err := st.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: u.ID, RunnerID: rn.ID, Title: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()

	url := testenv.Postgres(t)
	code, out, errOut := kndl(nil, "hub", "migrate-store", "--from", "sqlite:"+path, "--to", url)
	if code != 0 || !strings.Contains(out, "each table's count checked") || !strings.Contains(out, "sessions") {
		t.Fatalf("kndl hub migrate-store: exit %d\n%s\n%s", code, out, errOut)
	}
	env := map[string]string{"KNDL_HOME": t.TempDir(), "HUB_DATABASE_URL": url}
	pg, err := openStore(ctx, hub.FromEnv(func(k string) string { return env[k] }, env["KNDL_HOME"]))
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if got, err := pg.Sessions.SessionByID(ctx, x.ID); err != nil || got.Title != "kept" || got.RunnerID != rn.ID {
		t.Fatalf("the Session in PostgreSQL: %+v, %v", got, err)
	}

	if code, _, errOut := kndl(nil, "hub", "migrate-store", "--from", "sqlite:"+path, "--to", url); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("a second migrate-store into it: exit %d, %s; want refused as not empty", code, errOut)
	}
	running, _, err := store.TryLease(ctx, path, "kndl hub, pid 4242 on box-1")
	if err != nil || running == nil {
		t.Fatalf("a Hub's lease on the SQLite store: %v, %v", running, err)
	}
	code, _, errOut = kndl(nil, "hub", "migrate-store", "--from", "sqlite:"+path, "--to", testenv.Postgres(t))
	running.Release()
	if code != 1 || !strings.Contains(errOut, "a Hub runs on "+path+" (kndl hub, pid 4242 on box-1): stop it first") {
		t.Fatalf("migrate-store from the store of a running Hub: exit %d, %s; want refused naming it", code, errOut)
	}
	if code, _, errOut := kndl(env, "hub", "backup", "--to", filepath.Join(t.TempDir(), "b.db")); code != 1 || !strings.Contains(errOut, "pg_dump") {
		t.Fatalf("kndl hub backup on PostgreSQL: exit %d, %s; want refused naming pg_dump", code, errOut)
	}
}

func TestHubMigrateStoreSaysWhatItWants(t *testing.T) {
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"--to", "postgres://x@/y"}, 2, "usage: kndl hub migrate-store"},
		{[]string{"--from", "hub.db", "--to", "postgres://x@/y"}, 1, "want sqlite:PATH"},
		{[]string{"--from", "sqlite:/nowhere/hub.db", "--to", "postgres://x@/y"}, 1, "no such file"},
		{[]string{"--from", "sqlite:" + os.Args[0], "--to", "mysql://x@/y"}, 1, "--to: want a PostgreSQL URL"},
	}
	for _, tt := range tests {
		code, _, errOut := kndl(nil, append([]string{"hub", "migrate-store"}, tt.args...)...)
		if code != tt.code || !strings.Contains(errOut, tt.err) {
			t.Errorf("kndl hub migrate-store %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.err)
		}
	}
}

// TestHubDatabaseURLMustNamePostgres: a HUB_DATABASE_URL that is not a
// PostgreSQL URL is refused, not taken for a SQLite file's name.
func TestHubDatabaseURLMustNamePostgres(t *testing.T) {
	dir := t.TempDir()
	cfg := hub.FromEnv(func(k string) string {
		return map[string]string{"HUB_DATABASE_URL": "mysql://hub:pw@db/hub"}[k]
	}, dir)
	if _, err := openStore(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "want a PostgreSQL URL") || strings.Contains(err.Error(), "pw") {
		t.Fatalf("openStore with HUB_DATABASE_URL=mysql://…: %v; want refused, the URL not echoed", err)
	}
	if left, _ := os.ReadDir(dir); len(left) > 0 {
		t.Fatalf("KNDL_HOME holds %v; want nothing made", left)
	}
}
