package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
)

func open(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hub.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestMigrationsApplyOnceAndReopen(t *testing.T) {
	s, path := open(t)
	ctx := context.Background()
	if _, _, err := s.CreateRunner(ctx, "one", ""); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	rs, err := s2.Runners(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("after reopen: %d runners, %v; want 1", len(rs), err)
	}
}

func TestRunnerTokenStoredOnlyAsHash(t *testing.T) {
	s, path := open(t)
	ctx := context.Background()
	r, token, err := s.CreateRunner(ctx, "box", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RunnerByToken(ctx, token)
	if err != nil || got.ID != r.ID {
		t.Fatalf("RunnerByToken = %v, %v; want %s", got.ID, err, r.ID)
	}
	if _, err := s.RunnerByToken(ctx, token+"x"); !errors.Is(err, errdefs.ErrUnauthorized) {
		t.Fatalf("wrong token: err = %v, want ErrUnauthorized", err)
	}
	s.db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
	for _, f := range []string{path, path + "-wal"} {
		b, _ := os.ReadFile(f)
		if strings.Contains(string(b), token) {
			t.Fatalf("%s holds the runner token in the clear", f)
		}
	}
	if err := s.RevokeRunner(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RunnerByToken(ctx, token); !errors.Is(err, errdefs.ErrUnauthorized) {
		t.Fatalf("revoked token: err = %v, want ErrUnauthorized", err)
	}
	if err := s.RevokeRunner(ctx, r.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("revoking twice: err = %v, want ErrNotFound", err)
	}
	// The name is free again once revoked.
	if _, _, err := s.CreateRunner(ctx, "box", ""); err != nil {
		t.Fatalf("re-pairing a revoked name: %v", err)
	}
}

func TestRunnerNames(t *testing.T) {
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
		_, _, err := s.CreateRunner(ctx, tt.name, "")
		if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
			t.Errorf("CreateRunner(%q): err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

func TestCLITokens(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	u, err := s.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := s.DevUser(ctx)
	if again.ID != u.ID {
		t.Fatalf("DevUser made a second dev user")
	}
	tok, err := s.CreateCLIToken(ctx, u.ID, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UserByCLIToken(ctx, tok)
	if err != nil || got.ID != u.ID {
		t.Fatalf("UserByCLIToken = %v, %v", got, err)
	}
	s.RevokeCLIToken(ctx, tok)
	if _, err := s.UserByCLIToken(ctx, tok); !errors.Is(err, errdefs.ErrUnauthorized) {
		t.Fatalf("revoked CLI token: err = %v, want ErrUnauthorized", err)
	}
}

// TestARotatedRunnerTokenKeepsTheRunnersID: the new token names the same
// Runner, the old one no longer works, and a revoked Runner gets none.
func TestARotatedRunnerTokenKeepsTheRunnersID(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	r, old, err := s.CreateRunner(ctx, "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := s.RotateRunnerToken(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.RunnerByToken(ctx, fresh); err != nil || got.ID != r.ID {
		t.Fatalf("the new token: %v, %v; want runner %s", got.ID, err, r.ID)
	}
	if _, err := s.RunnerByToken(ctx, old); !errors.Is(err, errdefs.ErrUnauthorized) {
		t.Fatalf("the old token: err = %v, want ErrUnauthorized", err)
	}
	s.RevokeRunner(ctx, r.ID)
	if _, err := s.RotateRunnerToken(ctx, r.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("rotating a revoked Runner's token: err = %v, want ErrNotFound", err)
	}
}

// TestTheQueueKeepsTheOrderItsCreatorSets: prompts go out in queue order;
// one moved takes its place, one put back goes first, one on its way
// can't move.
func TestTheQueueKeepsTheOrderItsCreatorSets(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	x, u := devSession(t, s)
	ids := map[string]string{}
	for _, text := range []string{"a", "b", "c", "d"} {
		p, err := s.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids[text] = p.ID
	}
	order := func() string {
		q, _ := s.Prompts(ctx, x.ID)
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
		if err := s.MovePrompt(ctx, x.ID, ids[st.move], st.to); err != nil {
			t.Fatal(err)
		}
		if got := order(); got != st.want {
			t.Fatalf("after moving %s to %d: %s, want %s", st.move, st.to, got, st.want)
		}
	}
	p, ok, err := s.TakePrompt(ctx, x.ID)
	if err != nil || !ok || p.Text != "c" {
		t.Fatalf("took %q %v %v, want c", p.Text, ok, err)
	}
	if err := s.MovePrompt(ctx, x.ID, p.ID, 3); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("moving the prompt on its way: %v, want a conflict", err)
	}
	if err := s.MovePrompt(ctx, x.ID, "nope", 1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("moving no prompt: %v, want not found", err)
	}
	if got := order(); got != "cdba" { // the one on its way listed first
		t.Fatalf("queue with c on its way: %s", got)
	}
	s.SetPromptState(ctx, p.ID, Queued) // not taken: back at the head
	s.EnqueuePrompt(ctx, Prompt{SessionID: x.ID, AuthorID: u.ID, Text: "e"})
	if got := order(); got != "cdbae" {
		t.Fatalf("after putting c back and queueing e: %s, want cdbae", got)
	}
}
