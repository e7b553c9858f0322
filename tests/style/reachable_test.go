package style

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxMethods is the most methods a type may reach: a type past it is a
// god type, whose feature wants a type or package of its own with a small
// interface (../../docs/architecture.md).
const maxMethods = 40

// countedPackages are the packages whose types are held to maxMethods
// counted honestly: every method a pointer to the type reaches, through
// embedding too.
var countedPackages = []string{
	"./internal/runner/...",
	"./internal/hub/...",
	"./internal/store/...",
}

// TestNoTypeHasMoreThan40ReachableMethods holds every named type of the
// counted packages to maxMethods methods reachable from a pointer to it,
// and refuses a type that embeds another which embeds it back: that
// cycle puts both types' methods behind each pointer.
func TestNoTypeHasMoreThan40ReachableMethods(t *testing.T) {
	pkgs := typeCheck(t, countedPackages...)
	if len(pkgs) == 0 {
		t.Fatalf("type-checked no package of %v", countedPackages)
	}
	for _, p := range pkgs {
		for _, f := range methodFaults(p) {
			t.Error(f)
		}
	}
}

// methodFaults lists each named type of p reaching more than maxMethods
// methods, and each embedding cycle among p's types.
func methodFaults(p *types.Package) []string {
	var faults []string
	scope := p.Scope()
	embeds := map[string][]string{} // type -> the types of p it embeds
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		named, ok := tn.Type().(*types.Named)
		if !ok {
			continue
		}
		var ms *types.MethodSet
		if types.IsInterface(named) {
			ms = types.NewMethodSet(named)
		} else {
			ms = types.NewMethodSet(types.NewPointer(named))
		}
		if ms.Len() > maxMethods {
			faults = append(faults, fmt.Sprintf("%s.%s reaches %d methods, want at most %d: give what it grew a type of its own with a small interface to the rest",
				p.Path(), name, ms.Len(), maxMethods))
		}
		st, ok := named.Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for i := range st.NumFields() {
			f := st.Field(i)
			if !f.Embedded() {
				continue
			}
			ft := f.Type()
			if ptr, ok := ft.(*types.Pointer); ok {
				ft = ptr.Elem()
			}
			if en, ok := ft.(*types.Named); ok && en.Obj().Pkg() == p {
				embeds[name] = append(embeds[name], en.Obj().Name())
			}
		}
	}
	for _, from := range slices.Sorted(func(yield func(string) bool) {
		for k := range embeds {
			if !yield(k) {
				return
			}
		}
	}) {
		if path := embedCycle(embeds, from); path != nil {
			faults = append(faults, fmt.Sprintf("%s: %s embeds back what embeds it (%s): each part's methods reach the whole; give the part its own state and a narrow interface instead",
				p.Path(), from, strings.Join(path, " embeds ")))
		}
	}
	return faults
}

// embedCycle is a path of embeddings from from back to itself, or nil.
func embedCycle(embeds map[string][]string, from string) []string {
	seen := map[string]bool{}
	var walk func(at string, path []string) []string
	walk = func(at string, path []string) []string {
		for _, next := range embeds[at] {
			if next == from {
				return append(path, next)
			}
			if !seen[next] {
				seen[next] = true
				if p := walk(next, append(path, next)); p != nil {
					return p
				}
			}
		}
		return nil
	}
	return walk(from, []string{from})
}

// typeCheck type-checks the non-test files of the packages patterns name,
// their imports read from the compiler's export data (go list -export).
func typeCheck(t *testing.T, patterns ...string) []*types.Package {
	t.Helper()
	root := filepath.Join("..", "..")
	list := func(format string, deps bool) []string {
		args := []string{"list", "-e", "-f", format}
		if deps {
			args = append(args, "-export", "-deps")
		}
		cmd := exec.Command("go", append(args, patterns...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		var lines []string
		for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
			lines = append(lines, sc.Text())
		}
		return lines
	}
	exports := map[string]string{}
	for _, l := range list("{{.ImportPath}}\t{{.Export}}", true) {
		path, file, _ := strings.Cut(l, "\t")
		exports[path] = file
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	var pkgs []*types.Package
	for _, l := range list("{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", false) {
		f := strings.Split(l, "\t")
		var files []*ast.File
		for _, name := range strings.Fields(f[2]) {
			af, err := parser.ParseFile(fset, filepath.Join(f[1], name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, af)
		}
		p, err := (&types.Config{Importer: imp}).Check(f[0], fset, files, nil)
		if err != nil {
			t.Fatalf("type-check %s: %v", f[0], err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestMethodFaultsCountsEmbeddingAndBackPointers checks the check: methods
// promoted through embedding count, and a part embedding its owner back
// is refused even when no type passes the limit.
func TestMethodFaultsCountsEmbeddingAndBackPointers(t *testing.T) {
	methods := func(typ string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "func (*%s) %s%d() {}\n", typ, typ, i)
		}
		return b.String()
	}
	tests := []struct {
		name, src string
		want      []string // a piece of each fault, in order
	}{
		{"each under the limit", "type A struct{}\ntype B struct{}\n" + methods("A", 40) + methods("B", 40), nil},
		{"promoted through embedding", "type A struct{ *B }\ntype B struct{}\n" + methods("A", 21) + methods("B", 20),
			[]string{"p.A reaches 41 methods"}},
		{"promoted through a value and a chain", "type A struct{ B }\ntype B struct{ C }\ntype C struct{}\n" + methods("A", 1) + methods("B", 20) + methods("C", 20),
			[]string{"p.A reaches 41 methods"}},
		{"a back-pointer, small", "type Owner struct{ *part }\ntype part struct{ *Owner }\n" + methods("Owner", 2) + methods("part", 2),
			[]string{"Owner embeds back what embeds it (Owner embeds part embeds Owner)", "part embeds back what embeds it (part embeds Owner embeds part)"}},
		{"a back-pointer through a third", "type Owner struct{ *a }\ntype a struct{ b }\ntype b struct{ *Owner }\n",
			[]string{"Owner embeds a embeds b embeds Owner", "a embeds b embeds Owner embeds a", "b embeds Owner embeds a embeds b"}},
		{"a field, not embedded", "type Owner struct{ p *part }\ntype part struct{ o *Owner }\n" + methods("Owner", 40) + methods("part", 40), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", "package p\n"+tt.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			p, err := (&types.Config{}).Check("p", fset, []*ast.File{f}, nil)
			if err != nil {
				t.Fatal(err)
			}
			got := methodFaults(p)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d faults %q, want %d: %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("fault %d: got %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
