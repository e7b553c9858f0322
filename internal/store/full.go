package store

import (
	"errors"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Full reports whether err is the store's disk being full: no write can
// succeed until space is freed, and none is partly done (SQLite rolls the
// transaction back), so the caller may say so and try again later.
func Full(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_FULL
}
