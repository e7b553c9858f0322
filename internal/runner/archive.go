package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// Archived Sessions. Archiving removes a Session's Sandbox but keeps what
// makes it the same Session, all in the Session's own directory, the one
// place this host keeps a Session's files:
//
//	$RUNNER_HOME/sessions/<id>/
//	    workspace/      the Workspace, bound at /workspace
//	    sandbox-made    the Build and resources its Sandbox was made from
//	    mod/            the mod's copy for the last start
//	    disks/<name>    the Sandbox's Disks while it has none: moved out by
//	                    the backend as it is archived (RemoveKeepingDisks),
//	                    taken back by its next Sandbox (Disk.From)
//	    archived        while it is archived: when (RFC 3339)
//
// Restoring takes the mark away; the purge deletes the directory of a
// Session marked ArchiveKeep ago or more. Only the mark says archived:
// the backend moves its disks, the Runner alone decides how long they
// stay.

// archivedMark is the file that marks a Session's directory archived.
const archivedMark = "archived"

// archives are this host's archived Sessions. Marking, restoring and
// purging hold mu, so a restore never races the purge of its Session.
type archives struct {
	dir  string // $RUNNER_HOME/sessions
	keep time.Duration
	log  *slog.Logger
	mu   sync.Mutex
}

// mark records a Session archived at now.
func (a *archives) mark(id string, now time.Time) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return os.WriteFile(filepath.Join(a.dir, id, archivedMark), []byte(now.UTC().Format(time.RFC3339Nano)+"\n"), 0o600)
}

// unmark restores a Session: its disks and Workspace stay for good. It
// returns an ErrConflict saying the Workspace is gone once the purge has
// deleted it.
func (a *archives) unmark(id string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	dir := filepath.Join(a.dir, id)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("its Workspace is gone: this Runner deleted it, with Claude Code's state, once the Session had been archived for RUNNER_ARCHIVE_KEEP (%s here): %w",
			a.keep, errdefs.ErrConflict)
	} else if err != nil {
		return err
	}
	// No mark is a restore asked again: the first one's answer was lost.
	if err := os.Remove(filepath.Join(dir, archivedMark)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// archivedAt reads a Session's mark; ok is false if it has none. Call
// with mu held.
func (a *archives) archivedAt(id string) (at time.Time, ok bool) {
	p := filepath.Join(a.dir, id, archivedMark)
	b, err := os.ReadFile(p)
	if err != nil {
		return time.Time{}, false
	}
	if at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b))); err == nil {
		return at, true
	}
	// Unreadable: the file's own time, so it is purged all the same.
	st, err := os.Stat(p)
	if err != nil {
		return time.Time{}, false
	}
	return st.ModTime(), true
}

// purgePrefix names a Session's directory on its way out: renamed first,
// it is gone for a restore at once, and a purge cut short is finished by
// the next.
const purgePrefix = ".purge-"

// removeSessionDir removes a Session's directory or, for one that took a
// warm pool Sandbox, the pool directory it links to, then the link.
func removeSessionDir(path string) error {
	if target, err := os.Readlink(path); err == nil {
		if err := os.RemoveAll(filepath.Join(filepath.Dir(path), target)); err != nil {
			return err
		}
		return os.Remove(path)
	}
	return os.RemoveAll(path)
}

// purge deletes the directory of every Session archived keep or more
// before now, and returns their ids.
func (a *archives) purge(now time.Time) []string {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("list archived sessions", "err", err)
		}
		return nil
	}
	var purged []string
	for _, e := range entries {
		id := e.Name()
		if strings.HasPrefix(id, purgePrefix) {
			if err := removeSessionDir(filepath.Join(a.dir, id)); err != nil {
				a.log.Warn("finish a purge", "dir", id, "err", err)
			}
			continue
		}
		if !protocol.ValidSessionID(id) {
			continue
		}
		a.mu.Lock()
		at, ok := a.archivedAt(id)
		if ok && now.Sub(at) >= a.keep {
			gone := filepath.Join(a.dir, purgePrefix+id)
			err := os.Rename(filepath.Join(a.dir, id), gone)
			if err == nil {
				err = removeSessionDir(gone)
				purged = append(purged, id)
			}
			if err != nil {
				a.log.Warn("purge an archived session", "session", id, "err", err)
			} else {
				a.log.Info("purged an archived session: its disks and Workspace are deleted", "session", id, "archived_at", at)
			}
		}
		a.mu.Unlock()
	}
	return purged
}

// run purges at once and then every so often until ctx ends: an hour at
// most, and more often for a short keep, so none stays much past it.
func (a *archives) run(ctx context.Context) {
	every := min(time.Hour, max(a.keep/4, time.Second))
	for {
		a.purge(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// archiveSession removes an asleep Session's Sandbox, keeping its disks
// and Workspace in its directory, and marks it archived. A Sandbox made
// before the Runner kept disks past it has them inside the backend all the
// same, so it archives the same way.
func (r *Runner) archiveSession(ctx context.Context, id string) error {
	if !protocol.ValidSessionID(id) {
		return fmt.Errorf("session id %q: %w", id, errdefs.ErrInvalid)
	}
	r.mu.Lock()
	s := r.sessions[id]
	starting := s != nil && s.ctl == nil
	r.mu.Unlock()
	if starting {
		return fmt.Errorf("this Runner is still starting the Session; archive it once the start has ended: %w", errdefs.ErrConflict)
	}
	if s != nil {
		// The Hub puts a Session to sleep before it archives it: this one
		// was running all the same.
		if err := r.stopSession(ctx, id); err != nil {
			return err
		}
	}
	dir := r.sessionDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	err := r.backend.RemoveKeepingDisks(ctx, sandboxOf(dir, id), filepath.Join(dir, "disks"))
	if err != nil && !errors.Is(err, sandbox.ErrNotFound) {
		// Not found: it never had one (a start that failed early), or an
		// archive cut short removed it.
		return fmt.Errorf("remove the Sandbox, keeping its disks: %w", err)
	}
	if err := r.archives.mark(id, time.Now()); err != nil {
		return err
	}
	r.log.Info("archived a session: its Sandbox is removed, its disks and Workspace kept", "session", id, "for", r.cfg.ArchiveKeep)
	return nil
}

// restoreSession makes an archived Session's disks and Workspace stay;
// its next start makes a Sandbox that takes the disks back.
func (r *Runner) restoreSession(id string) error {
	if !protocol.ValidSessionID(id) {
		return fmt.Errorf("session id %q: %w", id, errdefs.ErrInvalid)
	}
	if err := r.archives.unmark(id); err != nil {
		return err
	}
	r.log.Info("restored a session", "session", id)
	return nil
}

// keptDisks gives each Disk its kept copy in dir, if it has one: a Session
// restored since it was archived.
func keptDisks(dir string, disks []sandbox.Disk) []sandbox.Disk {
	for i := range disks {
		if p := filepath.Join(dir, "disks", disks[i].Name); exists(p) {
			disks[i].From = p
		}
	}
	return disks
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
