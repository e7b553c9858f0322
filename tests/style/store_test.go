package style

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// wholeStoreAllowed are where a *store.Store may be taken, held or
// handed out, by role: the store itself, the daemons that open, back up and
// lease it, the Hub's wiring (hub.go), which hands each part the domains
// it uses, and what only tests build. Everything else names what it uses:
// a domain (*store.Sessions), a small interface of its own, or
// store.Domains.
var wholeStoreAllowed = append([]string{"internal/store/", "internal/daemon/", "internal/hub/hub.go"}, testOnly...)

// TestOnlyTheWiringHoldsTheWholeStore: no package outside the store, the
// daemons and the Hub's wiring takes a parameter, field or result of
// type store.Store, so none reaches every query there is, nor can
// close, back up or copy the database.
func TestOnlyTheWiringHoldsTheWholeStore(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, rel := range goFiles(t, root) {
		if under(rel, wholeStoreAllowed) {
			continue
		}
		for _, at := range wholeStoreUses(t, filepath.Join(root, rel)) {
			t.Errorf("%s:%s takes the whole *store.Store: take the domains it uses (st.Sessions, ...) or a small interface of its own", rel, at)
		}
	}
}

// TestWholeStoreUsesFindsEachWayToTakeIt checks the check: a parameter, a
// result, a field, an embedded field and an interface's method are found
// under any import name; a domain and a local Store are not.
func TestWholeStoreUsesFindsEachWayToTakeIt(t *testing.T) {
	tests := []struct {
		name, imp, src string // imp names the store's import, "" for store
		want           int
	}{
		{"parameter", "", "func f(st *store.Store) {}", 1},
		{"result", "", "func f() *store.Store { return nil }", 1},
		{"field", "", "type T struct{ st *store.Store }", 1},
		{"embedded", "", "type T struct{ *store.Store }", 1},
		{"value", "", "type T struct{ st store.Store }", 1},
		{"interface method", "", "type I interface{ Use(*store.Store) }", 1},
		{"closure", "", "var f = func(s *store.Store) {}", 1},
		{"renamed import", "db", "func f(st *db.Store) {}", 1},
		{"a domain", "", "func f(st *store.Sessions) {}", 0},
		{"the domains", "", "type T struct{ store store.Domains }", 0},
		{"another Store", "", "type Store struct{}\n\nfunc f(st *Store, _ store.Domains) {}", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.go")
			src := fmt.Sprintf("package x\n\nimport %s \"kndl.dev/kndl/internal/store\"\n\n%s\n", tt.imp, tt.src)
			if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := wholeStoreUses(t, path); len(got) != tt.want {
				t.Errorf("got %d uses (lines %v), want %d", len(got), got, tt.want)
			}
		})
	}
}

// wholeStoreUses gives the line of each parameter, result or field in the
// file at path whose type is store.Store or a pointer to it.
func wholeStoreUses(t *testing.T, path string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "kndl.dev/kndl/internal/store" {
			name = "store"
			if im.Name != nil {
				name = im.Name.Name
			}
		}
	}
	if name == "" {
		return nil
	}
	isStore := func(e ast.Expr) bool {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		return ok && x.Name == name && sel.Sel.Name == "Store"
	}
	var out []string
	check := func(fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, fd := range fl.List {
			if isStore(fd.Type) {
				out = append(out, strconv.Itoa(fset.Position(fd.Pos()).Line))
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.StructType:
			check(n.Fields)
		case *ast.FuncType:
			check(n.Params)
			check(n.Results)
		}
		return true
	})
	return out
}
