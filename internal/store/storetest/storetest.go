// Package storetest opens a store for the tests of the packages that use
// one: a SQLite store in the test's own directory, closed when the test
// ends. internal/store's own tests, which run on both engines, keep
// theirs (they can't import this package).
package storetest

import (
	"path/filepath"
	"testing"

	"kndl.dev/kndl/internal/store"
)

// Open opens a new SQLite store in t's temporary directory, closed when t
// ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
