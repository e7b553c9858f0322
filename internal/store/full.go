package store

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Full reports whether err is the store's disk being full, on either
// engine: no write can succeed until space is freed, and none is partly
// done (the transaction is rolled back), so the caller may say so and try
// again later.
func Full(err error) bool {
	var se *sqlite.Error
	var pe *pgconn.PgError
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL ||
		errors.As(err, &pe) && pe.Code == "53100" // disk_full
}
