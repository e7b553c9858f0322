// Package style checks the house style where a test can: every package has
// exactly one package doc comment, saying what it is; the CLI and the wire
// types import none of the Hub, its store or the Runner; no root context
// is made outside main, the daemons and tests; and docs/configuration.md
// lists every setting the code reads.
package style

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestEveryPackageHasExactlyOneDocComment(t *testing.T) {
	root := filepath.Join("..", "..")
	dirs := map[string][]string{} // package dir -> files with a package doc comment
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		if _, ok := dirs[dir]; !ok {
			dirs[dir] = nil
		}
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name+" ") || f.Doc != nil && f.Name.Name == "main" && strings.HasPrefix(f.Doc.Text(), "Command ") {
			dirs[dir] = append(dirs[dir], filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 10 {
		t.Fatalf("found only %d packages under %s", len(dirs), root)
	}
	for dir, docs := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil && dir != root {
			continue
		}
		if len(docs) != 1 {
			t.Errorf("%s: %d files carry a package doc comment (%v), want exactly one", dir, len(docs), docs)
		}
	}
}

// TestTheClientSideImportsNoServer: the CLI reaches the Hub through its API
// alone, and the wire types are not store rows; neither may depend on the
// Hub, its store or the Runner, directly or through another package.
func TestTheClientSideImportsNoServer(t *testing.T) {
	server := []string{"kndl.dev/kndl/internal/hub", "kndl.dev/kndl/internal/store", "kndl.dev/kndl/internal/runner"}
	for _, pkg := range []string{"./internal/cli", "./internal/api"} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = filepath.Join("..", "..")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, s := range server {
				if dep == s || strings.HasPrefix(dep, s+"/") {
					t.Errorf("%s depends on %s, want none of %v (go list -deps %s)", pkg, dep, server, pkg)
				}
			}
		}
	}
}
