package style

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

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
	for _, rel := range goFiles(t, root) {
		found := apiStrings(t, filepath.Join(root, rel))
		switch {
		case strings.HasPrefix(rel, "internal/apiclient/"):
			clientPaths += len(found)
			continue
		case under(rel, testOnly):
			continue
		case len(found) > 0 && allRoutePatterns(found):
			tables = append(tables, rel)
			continue
		}
		for _, s := range found {
			t.Errorf("%s:%d writes the API path %q: call internal/apiclient's method for it (or, in the Hub, add the route to its route table)", rel, s.line, s.value)
		}
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

// allRoutePatterns reports whether each of found is a route's pattern.
func allRoutePatterns(found []apiString) bool {
	for _, s := range found {
		if !routePattern.MatchString(s.value) {
			return false
		}
	}
	return true
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
