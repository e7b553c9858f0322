package style

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxMethods is the most methods one type in internal/hub/... declares: a
// type past it is a god type, whose feature wants a package of its own
// with a small interface (../../docs/architecture.md).
const maxMethods = 40

// TestNoTypeInTheHubHasMoreThan40Methods counts the methods each non-test
// type in internal/hub/... declares. It stays while internal/hub/session,
// whose parts embed its Owner back, is not among countedPackages.
func TestNoTypeInTheHubHasMoreThan40Methods(t *testing.T) {
	root := filepath.Join("..", "..")
	counts := map[string]int{} // package dir.type -> methods
	err := filepath.WalkDir(filepath.Join(root, "internal", "hub"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			counts[filepath.ToSlash(dir)+"."+receiverType(fn.Recv.List[0].Type)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["internal/hub/session.Owner"] == 0 {
		t.Fatal("counted no methods of session.Owner: the walk found nothing")
	}
	for typ, n := range counts {
		if n > maxMethods {
			t.Errorf("%s declares %d methods, want at most %d: give what it grew a package of its own", typ, n, maxMethods)
		}
	}
}

// receiverType is the name of a method's receiver type: T of T, *T, T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}
