// Package storetest opens a store for the tests of the packages that use
// one: a SQLite store in the test's own directory, closed when the test
// ends. internal/store's own tests, which run on both engines, keep
// theirs (they can't import this package).
package storetest

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"kndl.dev/kndl/internal/store"
)

// Open opens a new SQLite store in t's temporary directory, closed when t
// ends.
func Open(t testing.TB) *store.Store {
	t.Helper()
	b, err := migrated(t)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hub.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// template is the file of a store with every migration run, made once a
// process: running the migrations was 60% of a test's time in the
// packages that open a store a test (internal/hub/session).
var template struct {
	once sync.Once
	b    []byte
	err  error
}

// migrated returns template, made by the first test that asks.
func migrated(t testing.TB) ([]byte, error) {
	template.once.Do(func() {
		dir, err := os.MkdirTemp("", "kndl-storetest-")
		if err != nil {
			template.err = err
			return
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "hub.db")
		st, err := store.Open(t.Context(), path)
		if err == nil {
			err = st.Close() // the last close folds the WAL into the file
		}
		if err == nil {
			template.b, err = os.ReadFile(path)
		}
		template.err = err
	})
	return template.b, template.err
}
