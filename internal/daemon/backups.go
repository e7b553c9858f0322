package daemon

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"kndl.dev/kndl/internal/store"
)

// backupName is a backup's file name in a --into folder: its UTC time to
// the nanosecond, fixed width, so that names sort as times do and two
// backups never share one.
const backupName = "hub-20060102T150405.000000000Z.db"

// backupFile matches the names backupInto gives, and nothing else in the
// folder: --keep removes those alone.
var backupFile = regexp.MustCompile(`^hub-\d{8}T\d{6}\.\d{9}Z\.db$`)

// backupInto backs st up into a new file in dir (made 0700), named for
// now, and returns its path.
func backupInto(ctx context.Context, st *store.Store, dir string, now time.Time) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	to := filepath.Join(dir, now.UTC().Format(backupName))
	return to, st.Backup(ctx, to)
}

// keepNewest removes the backups in dir past the newest keep, and returns
// the paths it removed.
func keepNewest(dir string, keep int) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && backupFile.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	var removed []string
	for len(names) > keep {
		p := filepath.Join(dir, names[0])
		if err := os.Remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
		names = names[1:]
	}
	return removed, nil
}
