package style

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// testOnly are tests and the packages only tests import.
var testOnly = []string{
	"tests/",
	"internal/testkit/",
	"internal/testenv/",
	"internal/sandbox/sandboxtest/",
}

// goFiles lists the Go files under root but tests, by their paths from
// root with forward slashes; vendored, testdata and hidden folders left
// out.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "vendor" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// under reports whether the file rel is in one of dirs (each ending in /).
func under(rel string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(dir string) bool { return strings.HasPrefix(rel, dir) })
}
