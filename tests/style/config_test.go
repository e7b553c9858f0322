package style

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/hub"
	"kndl.dev/kndl/internal/runner"
)

// setting is the shape of a name kndl reads from its environment.
var setting = regexp.MustCompile(`^(HUB|RUNNER|KNDL|GITHUB|CLAUDE_CODE)_[A-Z0-9_]+$`)

// TestTheConfigurationReferenceListsEachSettingTheCodeReadsAndNoOther:
// docs/configuration.md has a row for every setting the Hub's and the
// Runner's configuration read (asked of FromEnv itself, so a name read
// through a table or a helper counts) and every one read by a getenv call
// elsewhere outside tests, and no row for a setting nothing reads.
func TestTheConfigurationReferenceListsEachSettingTheCodeReadsAndNoOther(t *testing.T) {
	root := filepath.Join("..", "..")
	read := map[string]string{} // setting -> where it is read
	record := func(where string) func(string) string {
		return func(name string) string {
			read[name] = where
			return ""
		}
	}
	hub.FromEnv(record("hub.FromEnv"), t.TempDir())
	if _, err := runner.FromEnv(record("runner.FromEnv"), t.TempDir()); err != nil {
		t.Fatalf("runner.FromEnv with nothing set: %v", err)
	}
	for _, rel := range goFiles(t, root) {
		if under(rel, testOnly) {
			continue
		}
		for _, name := range getenvNames(t, filepath.Join(root, rel)) {
			read[name] = rel
		}
	}
	for name := range read {
		if !setting.MatchString(name) {
			delete(read, name) // the system's own, such as PATH or TZ
		}
	}
	listed := configurationRows(t, filepath.Join(root, "docs", "configuration.md"))
	for name, where := range read {
		if !listed[name] {
			t.Errorf("%s reads %s, which docs/configuration.md does not list: add a row (setting, default, what it does)", where, name)
		}
	}
	for name := range listed {
		if _, ok := read[name]; !ok {
			t.Errorf("docs/configuration.md lists %s, which nothing reads: remove its row", name)
		}
	}
	if len(read) < 40 {
		t.Errorf("found %d settings read, want the 40 and more kndl has: is the scan still finding them?", len(read))
	}
}

// getenvNames are the names a file passes, as a string literal, to a
// function or method called getenv or Getenv.
func getenvNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 || !slices.Contains([]string{"getenv", "Getenv"}, calleeName(call.Fun)) {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if s, err := strconv.Unquote(lit.Value); err == nil {
				out = append(out, s)
			}
		}
		return true
	})
	return out
}

func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// configurationRows are the settings docs/configuration.md's tables have a
// row for: the name in backquotes in a row's first cell.
func configurationRows(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if !setting.MatchString(name) {
			t.Errorf("docs/configuration.md: a row's first cell %q is not one setting's name in backquotes", cells[1])
			continue
		}
		if out[name] {
			t.Errorf("docs/configuration.md lists %s twice", name)
		}
		out[name] = true
	}
	return out
}
