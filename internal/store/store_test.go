package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.PostgresMain(m)) }

// opener opens a new, empty store and returns it with the source that
// opens it again.
type opener func(t *testing.T) (*Store, string)

// engines are where the store's tests run: a SQLite file, and a database
// on the tests' own PostgreSQL server.
var engines = []struct {
	name   string
	source func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "hub.db") }},
	{"postgres", func(t *testing.T) string { return testenv.Postgres(t) }},
}

// eachEngine runs test once on each engine, as subtests named for them.
func eachEngine(t *testing.T, test func(t *testing.T, open opener)) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			test(t, func(t *testing.T) (*Store, string) {
				t.Helper()
				source := e.source(t)
				return openAt(t, source), source
			})
		})
	}
}

// open opens a new SQLite store, for what only SQLite does.
func open(t *testing.T) (*Store, string) {
	t.Helper()
	path := engines[0].source(t)
	return openAt(t, path), path
}

// openStill opens a new store whose clock stands still at now, a fixed
// time the test moves.
func openStill(t *testing.T, open opener) (s *Store, now *time.Time) {
	t.Helper()
	s, _ = open(t)
	at := time.UnixMilli(1700000000000)
	s.now = func() time.Time { return at }
	return s, &at
}

// openAt opens the store at source, closed when the test ends.
func openAt(t *testing.T, source string) *Store {
	t.Helper()
	s, err := Open(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsApplyOnceAndReopen(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, path := open(t)
		ctx := context.Background()
		if _, _, err := s.Runners.CreateRunner(ctx, "one", ""); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s2, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.Close()
		rs, err := s2.Runners.List(ctx)
		if err != nil || len(rs) != 1 {
			t.Fatalf("after reopen: %d runners, %v; want 1", len(rs), err)
		}
	})
}

// TestAStoreANewerKndlMigratedIsRefused: a store holding a migration this
// build lacks (as after an upgrade, rolled back without the backup) is
// refused at open, saying what it is and the way back, and nothing in it
// changes; without that migration it opens as before.
func TestAStoreANewerKndlMigratedIsRefused(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, path := open(t)
		ctx := context.Background()
		if _, _, err := s.Runners.CreateRunner(ctx, "one", ""); err != nil {
			t.Fatal(err)
		}
		migrations := func() string {
			var n, newest int
			if err := s.db.QueryRowContext(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &newest); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%d applied, newest %d", n, newest)
		}
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (99999, 1)`); err != nil {
			t.Fatal(err)
		}
		before := migrations()
		s2, err := Open(ctx, path)
		if err == nil {
			s2.Close()
		}
		if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "migration 99999") || !strings.Contains(err.Error(), "restore the backup taken before the upgrade") {
			t.Fatalf("open a store with a migration this build lacks: %v, want ErrConflict naming migration 99999 and the way back", err)
		}
		if after := migrations(); after != before {
			t.Fatalf("the refused open changed the store's migrations: %s, want %s", after, before)
		}
		if _, err := s.db.ExecContext(ctx, `DELETE FROM schema_migrations WHERE version = 99999`); err != nil {
			t.Fatal(err)
		}
		s3 := openAt(t, path)
		if rs, err := s3.Runners.List(ctx); err != nil || len(rs) != 1 {
			t.Fatalf("reopened without it: %d Runners, %v; want 1", len(rs), err)
		}
	})
}

func TestRunnerTokenStoredOnlyAsHash(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, path := open(t)
		ctx := context.Background()
		r, token, err := s.Runners.CreateRunner(ctx, "box", "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Runners.RunnerByToken(ctx, token)
		if err != nil || got.ID != r.ID {
			t.Fatalf("RunnerByToken = %v, %v; want %s", got.ID, err, r.ID)
		}
		if _, err := s.Runners.RunnerByToken(ctx, token+"x"); !errors.Is(err, errdefs.ErrUnauthorized) {
			t.Fatalf("wrong token: err = %v, want ErrUnauthorized", err)
		}
		var stored []byte
		if err := s.db.QueryRow(`SELECT token_hash FROM runners WHERE id = ?`, r.ID).Scan(&stored); err != nil || len(stored) != 32 || strings.Contains(string(stored), token) {
			t.Fatalf("the runners row holds %q, %v; want its 32-byte hash", stored, err)
		}
		if !IsPostgres(path) {
			s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
			for _, f := range []string{path, path + "-wal"} {
				b, _ := os.ReadFile(f)
				if strings.Contains(string(b), token) {
					t.Fatalf("%s holds the runner token in the clear", f)
				}
			}
		}
		if err := s.Runners.RevokeRunner(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Runners.RunnerByToken(ctx, token); !errors.Is(err, errdefs.ErrUnauthorized) {
			t.Fatalf("revoked token: err = %v, want ErrUnauthorized", err)
		}
		if err := s.Runners.RevokeRunner(ctx, r.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("revoking twice: err = %v, want ErrNotFound", err)
		}
		// The name is free again once revoked.
		if _, _, err := s.Runners.CreateRunner(ctx, "box", ""); err != nil {
			t.Fatalf("re-pairing a revoked name: %v", err)
		}
	})
}

func TestRunnerNames(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		tests := []struct {
			name string
			want error
		}{
			{"ok-name_1.2", nil},
			{"", errdefs.ErrInvalid},
			{"has space", errdefs.ErrInvalid},
			{strings.Repeat("a", 65), errdefs.ErrInvalid},
			{"ok-name_1.2", errdefs.ErrConflict},
		}
		for _, tt := range tests {
			_, _, err := s.Runners.CreateRunner(ctx, tt.name, "")
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Errorf("CreateRunner(%q): err = %v, want %v", tt.name, err, tt.want)
			}
		}
	})
}

func TestCLITokens(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		u, err := s.Members.DevUser(ctx)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := s.Members.DevUser(ctx)
		if again.ID != u.ID {
			t.Fatalf("DevUser made a second dev user")
		}
		tok, err := s.Signins.CreateCLIToken(ctx, u.ID, "laptop")
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Signins.UserByCLIToken(ctx, tok)
		if err != nil || got.ID != u.ID {
			t.Fatalf("UserByCLIToken = %v, %v", got, err)
		}
		s.Signins.RevokeCLIToken(ctx, tok)
		if _, err := s.Signins.UserByCLIToken(ctx, tok); !errors.Is(err, errdefs.ErrUnauthorized) {
			t.Fatalf("revoked CLI token: err = %v, want ErrUnauthorized", err)
		}
	})
}

// TestARotatedRunnerTokenKeepsTheRunnersID: the new token names the same
// Runner, the old one no longer works, and a revoked Runner gets none.
func TestARotatedRunnerTokenKeepsTheRunnersID(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		r, old, err := s.Runners.CreateRunner(ctx, "dev", "")
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := s.Runners.RotateRunnerToken(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Runners.RunnerByToken(ctx, fresh); err != nil || got.ID != r.ID {
			t.Fatalf("the new token: %v, %v; want runner %s", got.ID, err, r.ID)
		}
		if _, err := s.Runners.RunnerByToken(ctx, old); !errors.Is(err, errdefs.ErrUnauthorized) {
			t.Fatalf("the old token: err = %v, want ErrUnauthorized", err)
		}
		s.Runners.RevokeRunner(ctx, r.ID)
		if _, err := s.Runners.RotateRunnerToken(ctx, r.ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("rotating a revoked Runner's token: err = %v, want ErrNotFound", err)
		}
	})
}

// TestTheQueueKeepsTheOrderItsCreatorSets: prompts go out in queue order;
// one moved takes its place, one put back goes first, one on its way
// can't move.
// TestAStartsRetriesAreCountedUntilItComesUp: RetryStart counts on, kept
// by a reopened store, until the Session moves Active; an unknown Session
// is not found.
func TestAStartsRetriesAreCountedUntilItComesUp(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, source := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		if err := s.Sessions.MoveSession(ctx, x.ID, Starting, Failed, "the start failed", true); err != nil {
			t.Fatal(err)
		}
		for want := 1; want <= 2; want++ {
			if n, err := s.Sessions.RetryStart(ctx, x.ID); err != nil || n != want {
				t.Fatalf("RetryStart = %d, %v, want %d", n, err, want)
			}
		}
		s = openAt(t, source)
		if n, err := s.Sessions.RetryStart(ctx, x.ID); err != nil || n != 3 {
			t.Fatalf("RetryStart after a reopen = %d, %v, want 3", n, err)
		}
		if got, _ := s.Sessions.SessionByID(ctx, x.ID); got.StartRetries != 3 {
			t.Fatalf("StartRetries = %d, want 3", got.StartRetries)
		}
		if err := s.Sessions.MoveSession(ctx, x.ID, Failed, Starting, "retry 3", false); err != nil {
			t.Fatal(err)
		}
		if err := s.Sessions.MoveSession(ctx, x.ID, Starting, Active, "up", false); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Sessions.RetryStart(ctx, x.ID); err != nil || n != 1 {
			t.Fatalf("RetryStart once it came up = %d, %v, want 1", n, err)
		}
		if _, err := s.Sessions.RetryStart(ctx, "no-such-session"); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("RetryStart of an unknown Session: %v, want not found", err)
		}
	})
}

// TestATitleFollowsItsPullRequestUntilAPersonNamesIt: TitleFromPull sets
// the title of a Session nobody named, and says so; once a person renames
// it, the pull request's title no longer does; an update that keeps the
// title is not a naming.
func TestATitleFollowsItsPullRequestUntilAPersonNamesIt(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		title := func() string {
			got, _ := s.Sessions.SessionByID(ctx, x.ID)
			return got.Title
		}
		if err := s.Sessions.UpdateSession(ctx, x.ID, x.Title, "opus", ""); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			pull    string
			changed bool
		}{{"Add the thing", true}, {"Add the thing", false}} {
			if changed, err := s.Sessions.TitleFromPull(ctx, x.ID, tt.pull); err != nil || changed != tt.changed {
				t.Fatalf("TitleFromPull(%q) = %v, %v, want %v", tt.pull, changed, err, tt.changed)
			}
		}
		if got := title(); got != "Add the thing" {
			t.Fatalf("title %q, want the pull request's", got)
		}
		if err := s.Sessions.UpdateSession(ctx, x.ID, "Named by hand", "opus", ""); err != nil {
			t.Fatal(err)
		}
		if changed, err := s.Sessions.TitleFromPull(ctx, x.ID, "Another pull"); err != nil || changed || title() != "Named by hand" {
			t.Fatalf("after a rename, TitleFromPull = %v, %v and the title is %q, want the person's kept", changed, err, title())
		}
	})
}

// TestASessionKeepsOneSandboxTokenAtATime: SwapSandboxToken returns the
// one it replaces, nil when there was none; an unknown Session is not
// found.
func TestASessionKeepsOneSandboxTokenAtATime(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		for _, step := range []struct{ put, want []byte }{{nil, nil}, {[]byte("a"), nil}, {[]byte("b"), []byte("a")}, {nil, []byte("b")}, {nil, nil}} {
			if prev, err := s.Sessions.SwapSandboxToken(ctx, x.ID, step.put); err != nil || string(prev) != string(step.want) || (prev == nil) != (step.want == nil) {
				t.Fatalf("SwapSandboxToken(%q) = %q, %v, want %q", step.put, prev, err, step.want)
			}
		}
		if _, err := s.Sessions.SwapSandboxToken(ctx, "no-such-session", []byte("a")); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("an unknown Session: %v, want not found", err)
		}
	})
}

func TestTheQueueKeepsTheOrderItsCreatorSets(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		ids := map[string]string{}
		for _, text := range []string{"a", "b", "c", "d"} {
			p, err := s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: text})
			if err != nil {
				t.Fatal(err)
			}
			ids[text] = p.ID
		}
		order := func() string {
			q, _ := s.Prompts.List(ctx, x.ID)
			var out string
			for _, p := range q {
				out += p.Text
			}
			return out
		}
		steps := []struct {
			move string
			to   int
			want string
		}{
			{"d", 1, "dabc"},
			{"a", 99, "dbca"},
			{"b", 2, "dbca"},
			{"c", 0, "cdba"},
		}
		for _, st := range steps {
			if err := s.Prompts.MovePrompt(ctx, x.ID, ids[st.move], st.to); err != nil {
				t.Fatal(err)
			}
			if got := order(); got != st.want {
				t.Fatalf("after moving %s to %d: %s, want %s", st.move, st.to, got, st.want)
			}
		}
		p, ok, err := s.Prompts.TakePrompt(ctx, x.ID)
		if err != nil || !ok || p.Text != "c" {
			t.Fatalf("took %q %v %v, want c", p.Text, ok, err)
		}
		if err := s.Prompts.MovePrompt(ctx, x.ID, p.ID, 3); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("moving the prompt on its way: %v, want a conflict", err)
		}
		if err := s.Prompts.MovePrompt(ctx, x.ID, "nope", 1); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("moving no prompt: %v, want not found", err)
		}
		if got := order(); got != "cdba" { // the one on its way listed first
			t.Fatalf("queue with c on its way: %s", got)
		}
		if err := s.Prompts.SetPromptState(ctx, p.ID, Delivering, Queued); err != nil { // not taken: back at the head
			t.Fatal(err)
		}
		s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "e"})
		if got := order(); got != "cdbae" {
			t.Fatalf("after putting c back and queueing e: %s, want cdbae", got)
		}
	})
}

// TestAPromptMovesOnlyFromTheStateItsMoverExpects: a delivery's outcome is
// recorded only for a prompt still in the state its caller saw, so two
// acknowledgements, or one racing a person's cancel, can't undo each other.
func TestAPromptMovesOnlyFromTheStateItsMoverExpects(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, u := devSession(t, s)
		p, _ := s.Prompts.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "a"})
		state := func() PromptState {
			t.Helper()
			got, err := s.Prompts.PromptByID(ctx, x.ID, p.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.State
		}
		if err := s.Prompts.SetPromptState(ctx, p.ID, Delivering, Delivered); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("delivering a queued prompt: %v, want a conflict", err)
		}
		if got := state(); got != Queued {
			t.Fatalf("a refused move left it %s, want queued", got)
		}
		delivering := func(want int) { // DeliveringSessions, a Hub's start's one read of them
			t.Helper()
			got, err := s.Prompts.DeliveringSessions(ctx)
			if err != nil || len(got) != want || want == 1 && !got[x.ID] {
				t.Fatalf("got Sessions with a prompt on its way %v (%v), want %d, this one's", got, err, want)
			}
		}
		delivering(0)
		if _, ok, err := s.Prompts.TakePrompt(ctx, x.ID); !ok || err != nil {
			t.Fatalf("take: %v %v", ok, err)
		}
		delivering(1)
		if err := s.Prompts.SetPromptState(ctx, p.ID, Delivering, Delivered); err != nil {
			t.Fatal(err)
		}
		delivering(0)
		if err := s.Prompts.SetPromptState(ctx, p.ID, Delivering, Queued); !errors.Is(err, errdefs.ErrConflict) {
			t.Fatalf("putting back a delivered prompt: %v, want a conflict", err)
		}
		if got, _ := s.Prompts.PromptByID(ctx, x.ID, p.ID); got.State != Delivered || got.DeliveredAt.IsZero() {
			t.Fatalf("a refused requeue left it %s (delivered at %v), want delivered", got.State, got.DeliveredAt)
		}
		if err := s.Prompts.SetPromptState(ctx, "no-such-prompt", Delivering, Queued); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("no such prompt: %v, want not found", err)
		}
	})
}

// TestARunnerIsUsableByWhoPairedItOrOnceShared: a Member's Runner runs
// their Sessions alone until shared; one paired on the Hub's machine is
// shared; a revoked one runs nobody's; removing a Member revokes theirs.
func TestARunnerIsUsableByWhoPairedItOrOnceShared(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		bob, _ := s.Members.ClaimSetupLink(ctx, mustSetupLink(t, s), GitHubIdentity{ID: 1, Login: "bob"})
		const carol = "carol-id"
		bobs, _, _ := s.Runners.CreateRunner(ctx, "bobs-box", bob.ID)
		hubs, _, _ := s.Runners.CreateRunner(ctx, "hubs-box", "")
		read := func(id string) Runner {
			t.Helper()
			rn, err := s.Runners.RunnerByID(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return rn
		}
		share := func(id string, on bool) string {
			t.Helper()
			if err := s.Runners.SetRunnerShared(ctx, id, on); err != nil {
				t.Fatal(err)
			}
			return id
		}
		tests := []struct {
			name       string
			rn         Runner
			bob, carol bool
		}{
			{"a Member's", read(bobs.ID), true, false},
			{"the Hub's", read(hubs.ID), true, true},
			{"a Member's, shared", read(share(bobs.ID, true)), true, true},
			{"a Member's, unshared", read(share(bobs.ID, false)), true, false},
		}
		for _, tt := range tests {
			if got := tt.rn.UsableBy(bob.ID); got != tt.bob {
				t.Errorf("%s: usable by its pairer = %v, want %v", tt.name, got, tt.bob)
			}
			if got := tt.rn.UsableBy(carol); got != tt.carol {
				t.Errorf("%s: usable by another = %v, want %v", tt.name, got, tt.carol)
			}
			if got := tt.rn.UsableBy(""); got != tt.rn.Shared {
				t.Errorf("%s: usable by no one = %v, want %v", tt.name, got, tt.rn.Shared)
			}
		}

		_, revoked, err := s.Members.RemoveMember(ctx, bob.ID)
		if err != nil || len(revoked) != 1 || revoked[0].ID != bobs.ID {
			t.Fatalf("RemoveMember revoked %+v, %v; want bobs-box", revoked, err)
		}
		if rn := read(bobs.ID); rn.RevokedAt.IsZero() || rn.UsableBy(bob.ID) {
			t.Fatalf("a removed Member's Runner: %+v, want revoked and usable by nobody", rn)
		}
		if rn := read(hubs.ID); !rn.RevokedAt.IsZero() {
			t.Fatal("removing a Member revoked the Hub's Runner")
		}
		if err := s.Runners.SetRunnerShared(ctx, bobs.ID, true); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("sharing a revoked Runner: %v, want not found", err)
		}
	})
}

// TestTheRunnerOwnersMigration: Runners from before owners were kept are
// their pairer's; those paired on the Hub's machine are shared; those of
// Members removed before are revoked.
func TestTheRunnerOwnersMigration(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, path := open(t)
		ctx := context.Background()
		bob, _ := s.Members.ClaimSetupLink(ctx, mustSetupLink(t, s), GitHubIdentity{ID: 1, Login: "bob"})
		gone, _ := s.Members.DevUser(ctx)
		mine, _, _ := s.Runners.CreateRunner(ctx, "bobs-box", bob.ID)
		hubs, _, _ := s.Runners.CreateRunner(ctx, "hubs-box", "")
		left, _, _ := s.Runners.CreateRunner(ctx, "gone-box", gone.ID)
		// As the store was before 0009, with gone's removal recorded then.
		for _, q := range []string{
			`UPDATE users SET removed_at = 1 WHERE id = '` + gone.ID + `'`,
			`ALTER TABLE runners DROP COLUMN shared`,
			`DELETE FROM schema_migrations WHERE version = 9`,
		} {
			if _, err := s.db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		s.Close()
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, tt := range []struct {
			id              string
			shared, revoked bool
		}{{mine.ID, false, false}, {hubs.ID, true, false}, {left.ID, false, true}} {
			rn, _ := s.Runners.RunnerByID(ctx, tt.id)
			if rn.Shared != tt.shared || rn.RevokedAt.IsZero() == tt.revoked {
				t.Errorf("%s after the migration: shared %v, revoked %v; want %v, %v", rn.Name, rn.Shared, !rn.RevokedAt.IsZero(), tt.shared, tt.revoked)
			}
		}
	})
}

// must fails t at once on an error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// invited makes a Member by an invite of inviter's, as a Hub admits one.
func invited(t *testing.T, s *Store, inviterID, login string, githubID int64) User {
	t.Helper()
	ctx := context.Background()
	_, secret, err := s.Members.CreateInvite(ctx, login, inviterID, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.Members.RedeemInvite(ctx, secret, GitHubIdentity{ID: githubID, Login: login})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func mustSetupLink(t *testing.T, s *Store) string {
	t.Helper()
	secret, err := s.Members.NewSetupLink(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// TestABackupIsAWholeCopyMadeWhileWritesGoOn: a backup taken while
// another goroutine writes opens as a store with every row the backup saw,
// and refuses to overwrite a file.
func TestABackupIsAWholeCopyMadeWhileWritesGoOn(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	for i := range 50 {
		if _, _, err := s.Runners.CreateRunner(ctx, fmt.Sprintf("r%d", i), ""); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 50; i < 200; i++ {
			s.Runners.CreateRunner(ctx, fmt.Sprintf("r%d", i), "")
		}
	}()
	path := filepath.Join(t.TempDir(), "backup.db")
	if err := s.Backup(ctx, path); err != nil {
		t.Fatal(err)
	}
	<-done
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("the backup does not open: %v", err)
	}
	defer b.Close()
	rs, err := b.Runners.List(ctx)
	if err != nil || len(rs) < 50 {
		t.Fatalf("the backup has %d Runners, %v; want at least the 50 made before it", len(rs), err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("the backup's mode is %v, want 0600: it holds sealed secrets and token hashes", st.Mode().Perm())
	}
	if err := s.Backup(ctx, path); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("a backup over a file: %v, want refused", err)
	}
}

// TestAMemberSigningInAgainKeepsTheirRole: the Owner signing in under a
// new login stays the Owner, a Member stays a Member, and the login moves.
func TestAMemberSigningInAgainKeepsTheirRole(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		owner, err := s.Members.ClaimSetupLink(ctx, mustSetupLink(t, s), GitHubIdentity{ID: 1, Login: "olivia"})
		if err != nil || !owner.IsOwner {
			t.Fatalf("claim: %+v, %v", owner, err)
		}
		invited(t, s, owner.ID, "bob", 2)
		for _, tt := range []struct {
			gh    GitHubIdentity
			owner bool
		}{{GitHubIdentity{ID: 1, Login: "olivia2"}, true}, {GitHubIdentity{ID: 2, Login: "robert"}, false}} {
			u, err := s.Members.MemberByGitHub(ctx, tt.gh)
			if err != nil || u.IsOwner != tt.owner || u.GitHubLogin != tt.gh.Login {
				t.Errorf("%s signs in again: %+v, %v; want owner %v", tt.gh.Login, u, err, tt.owner)
			}
		}
	})
}
