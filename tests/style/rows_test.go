package style

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestNoStoreRowCarriesAJSONTag: a store row is the Hub's own; what goes
// out is internal/api (internal/protocol to a Runner), converted in one
// place (internal/hub/wire.go). A json tag on a row would let it slip out
// as the wire again, its shape tied to the table's.
func TestNoStoreRowCarriesAJSONTag(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "internal", "store", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("found no files in internal/store: %v", err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, _ := strconv.Unquote(field.Tag.Value)
			if _, has := reflect.StructTag(tag).Lookup("json"); has {
				t.Errorf("%s: a store row carries the json tag %s: put the field on the api type and convert the row in internal/hub/wire.go", fset.Position(field.Pos()), field.Tag.Value)
			}
			return true
		})
	}
}
