package style

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestNoHandlerTypeInTheHubHoldsTheWholeHub: a type whose methods the
// route table names holds the parts of the Hub it uses (the shared core and
// named fields), so what a handler can reach is written beside it; a
// *Hub in it would reach all the Hub's state again.
func TestNoHandlerTypeInTheHubHoldsTheWholeHub(t *testing.T) {
	dir := filepath.Join("..", "..", "internal", "hub")
	files := parseHub(t, dir)
	handlers := routeTableTypes(t, files)
	if len(handlers) < 10 {
		t.Fatalf("found %d handler types in the route table, want the dozen and more it names: %v", len(handlers), handlers)
	}
	for _, name := range handlers {
		st := structType(files, name)
		if st == nil {
			t.Errorf("handler type %s is not a struct declared in internal/hub", name)
			continue
		}
		if holdsHub(st) {
			t.Errorf("handler type %s holds a *Hub: give it the core and named fields for the parts of the Hub it uses, built in routes.go", name)
		}
	}
}

// parseHub parses internal/hub's own non-test files.
func parseHub(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// routeTableTypes are the types of the values whose methods the Hub's
// route table (its routes method) names: a variable set to a composite
// literal or to a call of a function returning one named type, or the
// literal itself.
func routeTableTypes(t *testing.T, files []*ast.File) []string {
	t.Helper()
	var body *ast.BlockStmt
	makers := map[string]string{} // function -> the named type it returns
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			switch {
			case !ok:
			case fn.Recv != nil && fn.Name.Name == "routes":
				body = fn.Body
			case fn.Recv == nil && fn.Type.Results != nil && len(fn.Type.Results.List) == 1:
				if id, ok := fn.Type.Results.List[0].Type.(*ast.Ident); ok {
					makers[fn.Name.Name] = id.Name
				}
			}
		}
	}
	if body == nil {
		t.Fatal("found no routes method in internal/hub")
	}
	litType := func(e ast.Expr) string {
		switch x := e.(type) {
		case *ast.CompositeLit:
			if id, ok := x.Type.(*ast.Ident); ok {
				return id.Name
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok {
				return makers[id.Name]
			}
		}
		return ""
	}
	vars := map[string]string{} // variable -> its type
	ast.Inspect(body, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok {
			for i, name := range vs.Names {
				if i < len(vs.Values) && litType(vs.Values[i]) != "" {
					vars[name.Name] = litType(vs.Values[i])
				}
			}
		}
		return true
	})
	seen := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		ret, ok := n.(*ast.ReturnStmt)
		if !ok {
			return true
		}
		ast.Inspect(ret, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && vars[id.Name] != "" {
				seen[vars[id.Name]] = true
			} else if name := litType(sel.X); name != "" {
				seen[name] = true
			}
			return true
		})
		return false
	})
	var out []string
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func structType(files []*ast.File, name string) *ast.StructType {
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				if ts := s.(*ast.TypeSpec); ts.Name.Name == name {
					st, _ := ts.Type.(*ast.StructType)
					return st
				}
			}
		}
	}
	return nil
}

// holdsHub reports whether a struct has a field, embedded or named, of
// type Hub or *Hub.
func holdsHub(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		typ := f.Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.Name == "Hub" {
			return true
		}
	}
	return false
}
