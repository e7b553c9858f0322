package style

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// apiPathsAllowed are where Go code may write an /api/ path besides the
// Hub's route table: the CLI's client, which has one method per call, and
// what only tests build.
var apiPathsAllowed = append([]string{"internal/apiclient/"}, testOnly...)

// apiPathExceptions are strings holding /api/ that are no path of the
// Hub's API, each with what it is.
var apiPathExceptions = map[string]string{
	"/api/v3": "GitHub Enterprise Server's REST API, which internal/hub's config derives from GITHUB_URL",
}

// webPathsModule is the one web UI script that writes the API's paths;
// the pages' other scripts import it.
const webPathsModule = "internal/web/static/paths.js"

// routePattern is a net/http pattern of an /api/ route: "METHOD /api/…".
var routePattern = regexp.MustCompile(`^[A-Z]+ /api/`)

// TestAPIPathsAreWrittenOnce: each path of the Hub's API is written once
// on each side of it, so a route moved or renamed is changed in one place
// per side: the Hub's route table (the one Go file whose /api/ strings are
// all route patterns), internal/apiclient for the CLI, and the web UI's
// paths module for the pages. Any other Go code but tests, and any other
// script or template of the web UI, takes its paths from those.
func TestAPIPathsAreWrittenOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	var tables []string // files whose /api/ strings are all route patterns
	clientPaths := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (d.Name() == "vendor" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		found := apiStrings(t, path)
		if slices.ContainsFunc(apiPathsAllowed, func(dir string) bool { return strings.HasPrefix(rel, dir) }) {
			if strings.HasPrefix(rel, "internal/apiclient/") {
				clientPaths += len(found)
			}
			return nil
		}
		if len(found) > 0 && !slices.ContainsFunc(found, func(s apiString) bool { return !routePattern.MatchString(s.value) }) {
			tables = append(tables, rel)
			return nil
		}
		for _, s := range found {
			t.Errorf("%s:%d writes the API path %q: call internal/apiclient's method for it (or, in the Hub, add the route to its route table)", rel, s.line, s.value)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 1 {
		t.Errorf("found %d files whose /api/ strings are all route patterns (%v), want the Hub's one route table", len(tables), tables)
	}
	if clientPaths < 20 {
		t.Errorf("found %d /api/ paths in internal/apiclient: is the walk reading the code?", clientPaths)
	}

	webPaths := 0
	for _, glob := range []string{"internal/web/static/*.js", "internal/web/templates/*.html"} {
		files, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil || len(files) == 0 {
			t.Fatalf("no files match %s (%v)", glob, err)
		}
		for _, path := range files {
			rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
			lines := apiLines(t, path)
			if rel == webPathsModule {
				webPaths = len(lines)
				continue
			}
			for _, n := range lines {
				t.Errorf("%s:%d writes an /api/ path: import it from %s", rel, n, webPathsModule)
			}
		}
	}
	if webPaths < 5 {
		t.Errorf("%s writes %d /api/ paths: is it still the web UI's paths module?", webPathsModule, webPaths)
	}
}

// apiString is a Go string literal holding /api/, and its line.
type apiString struct {
	value string
	line  int
}

// apiStrings lists the string literals of the Go file at path that hold
// /api/ and are not a named exception. Comments don't count.
func apiStrings(t *testing.T, path string) []apiString {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []apiString
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		v, err := strconv.Unquote(lit.Value)
		if err == nil && strings.Contains(v, "/api/") && apiPathExceptions[v] == "" {
			out = append(out, apiString{v, fset.Position(lit.Pos()).Line})
		}
		return true
	})
	return out
}

// apiLines lists the lines of a script or template that hold /api/
// outside a line comment.
func apiLines(t *testing.T, path string) []int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []int
	s := bufio.NewScanner(f)
	s.Buffer(nil, 1<<20)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if strings.HasPrefix(line, "//") || strings.HasPrefix(line, "*") || strings.HasPrefix(line, "/*") {
			continue
		}
		if strings.Contains(line, "/api/") {
			out = append(out, n)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
