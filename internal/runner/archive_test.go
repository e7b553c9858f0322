package runner

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/sandbox"
)

// TestThePurgeDeletesOnlySessionsArchivedKeepAgo: a Session archived
// longer ago than RUNNER_ARCHIVE_KEEP is deleted with its disks and
// Workspace, and a restore then says its Workspace is gone; one archived
// more recently, one restored and one never archived stay, and a purge cut
// short is finished.
func TestThePurgeDeletesOnlySessionsArchivedKeepAgo(t *testing.T) {
	a := &archives{dir: t.TempDir(), keep: time.Hour, log: slog.New(slog.DiscardHandler)}
	now := time.Now()
	const (
		old      = "00000000-0000-4000-8000-000000000001"
		young    = "00000000-0000-4000-8000-000000000002"
		restored = "00000000-0000-4000-8000-000000000003"
		live     = "00000000-0000-4000-8000-000000000004"
	)
	for _, id := range []string{old, young, restored, live, ".purge-" + live, "not-a-session"} {
		if err := os.MkdirAll(filepath.Join(a.dir, id, "workspace"), 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(a.dir, id, "workspace", "f"), []byte("work"), 0o600)
	}
	for id, at := range map[string]time.Time{old: now.Add(-2 * time.Hour), young: now.Add(-10 * time.Minute), restored: now.Add(-2 * time.Hour)} {
		if err := a.mark(id, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.unmark(restored); err != nil {
		t.Fatal(err)
	}

	if got := a.purge(now); !slices.Equal(got, []string{old}) {
		t.Fatalf("purged %v, want only %s", got, old)
	}
	for id, want := range map[string]bool{old: false, ".purge-" + live: false, young: true, restored: true, live: true, "not-a-session": true} {
		if _, err := os.Stat(filepath.Join(a.dir, id, "workspace", "f")); (err == nil) != want {
			t.Errorf("%s after the purge: kept %v, want %v", id, err == nil, want)
		}
	}
	err := a.unmark(old)
	if !errors.Is(err, errdefs.ErrConflict) || !strings.Contains(err.Error(), "Workspace is gone") {
		t.Fatalf("restoring a purged Session: %v, want a conflict saying its Workspace is gone", err)
	}

	// Restored, even twice (an answer lost), it is never purged.
	for range 2 {
		if err := a.unmark(young); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.purge(now.Add(24 * time.Hour)); len(got) != 0 {
		t.Fatalf("purged %v a day later, want none: nothing is archived", got)
	}
}

// TestANewSandboxTakesBackOnlyTheDisksKept: a Session restored since it
// was archived gives its new Sandbox the kept disks; one without them gets
// fresh ones.
func TestANewSandboxTakesBackOnlyTheDisksKept(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "disks", "claude"), 0o700)
	got := keptDisks(dir, []sandbox.Disk{{Name: "claude", Target: "/var/lib/kndl/claude"}, {Name: "cache", Target: "/var/cache/kndl"}})
	if got[0].From != filepath.Join(dir, "disks", "claude") || got[1].From != "" {
		t.Fatalf("disks = %+v, want claude taken back and cache fresh", got)
	}
}

// TestAnArchiveWhileTheRunnerStartsTheSessionIsRefused: its Sandbox may
// be in the making, so the archive waits for the start to end.
func TestAnArchiveWhileTheRunnerStartsTheSessionIsRefused(t *testing.T) {
	const id = "00000000-0000-4000-8000-000000000001"
	r := &Runner{sessions: map[string]*session{id: {id: id}}}
	if err := r.archiveSession(context.Background(), id); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("archive during a start: %v, want a conflict", err)
	}
}

// TestRunnerArchiveKeep: RUNNER_ARCHIVE_KEEP is a Go duration, 30 days
// unless set.
func TestRunnerArchiveKeep(t *testing.T) {
	tests := []struct {
		env     string
		want    time.Duration
		wantErr bool
	}{
		{"", 30 * 24 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"2h30m", 150 * time.Minute, false},
		{"30", 0, true},
		{"-1h", 0, true},
		{"0s", 0, true},
	}
	for _, tc := range tests {
		env := map[string]string{"KNDL_HUB_URL": "http://127.0.0.1:7380", "RUNNER_TOKEN": "kndlr_x", "RUNNER_ARCHIVE_KEEP": tc.env}
		c, err := FromEnv(func(k string) string { return env[k] }, t.TempDir())
		if err == nil {
			err = c.check()
		}
		if (err != nil) != tc.wantErr {
			t.Errorf("RUNNER_ARCHIVE_KEEP=%q: err %v, want error %v", tc.env, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && c.ArchiveKeep != tc.want {
			t.Errorf("RUNNER_ARCHIVE_KEEP=%q: got %s, want %s", tc.env, c.ArchiveKeep, tc.want)
		}
	}
}
