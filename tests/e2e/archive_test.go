package e2e

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
)

// TestAnArchivedSessionIsRestoredWithItsConversationAndWorkspace: kndl
// archive sleeps an awake Session and removes its Sandbox, keeping its
// disks and Workspace on the Runner; it refuses prompts until kndl restore,
// after which a prompt wakes it into the same conversation, its files as
// they were.
func TestAnArchivedSessionIsRestoredWithItsConversationAndWorkspace(t *testing.T) {
	t.Parallel()
	s := Start(t)
	v := s.withNote()

	if out, errOut, code := s.kndl("", "archive", v.ID); code != 0 {
		t.Fatalf("kndl archive: exit %d %s %s", code, out, errOut)
	}
	if got := s.state(v.ID); got.State != api.Archived || got.ArchivedAt.IsZero() {
		t.Fatalf("after the archive: %s, archived at %v", got.State, got.ArchivedAt)
	}
	if _, err := s.Backend.Status(context.Background(), "s-"+v.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the Sandbox after the archive: %v, want it gone", err)
	}
	dir := filepath.Join(s.Home, "sessions", v.ID)
	for _, p := range []string{"workspace/note.txt", "disks/claude", "disks/cache/c.txt", "archived"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err != nil {
			t.Errorf("the Runner did not keep %s: %v", p, err)
		}
	}
	if code := s.Do(http.MethodPost, "/api/sessions/"+v.ID+"/prompts", api.PromptRequest{Text: "too soon"}, nil); code != http.StatusConflict {
		t.Fatalf("a prompt to an archived Session: %d, want 409", code)
	}

	if out, errOut, code := s.kndl("", "restore", v.ID); code != 0 {
		t.Fatalf("kndl restore: exit %d %s %s", code, out, errOut)
	}
	if got := s.state(v.ID); got.State != api.Asleep || !got.ArchivedAt.IsZero() {
		t.Fatalf("after the restore: %s, archived at %v; want Asleep", got.State, got.ArchivedAt)
	}
	s.noteKept(v.ID)
	if st, err := s.Backend.Status(context.Background(), "s-"+v.ID); err != nil || st.State != sandbox.StateRunning {
		t.Fatalf("the restored Session's new Sandbox: %+v, %v", st, err)
	}
	for _, p := range []string{"disks", "archived"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still in the Session's directory once its Sandbox took the disks back: %v", p, err)
		}
	}
}

// TestAPurgedSessionCannotBeRestored: with a tiny RUNNER_ARCHIVE_KEEP the
// Runner deletes an archived Session's disks and Workspace, and kndl
// restore then says its Workspace is gone; it stays Archived.
func TestAPurgedSessionCannotBeRestored(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArchiveKeep(time.Millisecond))
	v := s.Ready("short-lived", "ok")
	if out, errOut, code := s.kndl("", "archive", v.ID); code != 0 {
		t.Fatalf("kndl archive: exit %d %s %s", code, out, errOut)
	}
	dir := filepath.Join(s.Home, "sessions", v.ID)
	testenv.Eventually(t, testenv.WaitMedium, "the purge of the archived Session", func() bool {
		_, err := os.Lstat(dir)
		return errors.Is(err, fs.ErrNotExist)
	})
	_, errOut, code := s.kndl("", "restore", v.ID)
	if code == 0 || !strings.Contains(errOut, "Workspace is gone") {
		t.Fatalf("kndl restore after the purge: exit %d, %q; want a failure saying the Workspace is gone", code, errOut)
	}
	t.Logf("kndl restore after the purge: %s", strings.TrimSpace(errOut))
	if got := s.state(v.ID); got.State != api.Archived {
		t.Fatalf("after a refused restore: %s, want Archived", got.State)
	}
}
