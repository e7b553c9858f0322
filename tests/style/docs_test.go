package style

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// maxDocBytes bounds each reference doc: past it, a doc has turned back
// into a diary (dated runs belong in commit messages).
const maxDocBytes = 40_000

var (
	// docPath is a path under internal/, cmd/ or tests/ the doc names in
	// backquotes, a package or a file.
	docPath = regexp.MustCompile("`((?:internal|cmd|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_])/?`")
	// docTest is a test or benchmark function's name.
	docTest = regexp.MustCompile(`\b(?:Test|Benchmark)[A-Z][A-Za-z0-9_]*`)
	// testFunc is a test or benchmark function's declaration.
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)\(`)
	// firstCell is a table row's first cell, one name in backquotes.
	firstCell = regexp.MustCompile("^\\| `([^`]+)` \\|")
)

// TestTheReferenceDocsStayReferences: docs/architecture.md and
// docs/performance.md stay under maxDocBytes; architecture.md has one row
// in its Packages table per package, names no package or file that does
// not exist, and names only tests that exist, each in the package its
// invariant row names; performance.md names only tests and benchmarks
// that exist, or the beginnings of their names in its -run and -bench
// patterns.
func TestTheReferenceDocsStayReferences(t *testing.T) {
	root := filepath.Join("..", "..")
	funcs := testFuncs(t, root) // name -> package dirs declaring it
	for _, name := range []string{"architecture.md", "performance.md"} {
		b, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxDocBytes {
			t.Errorf("docs/%s is %d bytes, want at most %d: keep today's rules and figures, leave history to git", name, len(b), maxDocBytes)
		}
		for _, fn := range docTest.FindAllString(string(b), -1) {
			// performance.md's commands name tests by -run and -bench
			// patterns: a name there must begin one that exists.
			if len(funcs[fn]) == 0 && (name == "architecture.md" || !slices.ContainsFunc(slices.Collect(maps.Keys(funcs)), func(f string) bool { return strings.HasPrefix(f, fn) })) {
				t.Errorf("docs/%s names %s, which no _test.go file declares: name the test that checks it, or drop the name", name, fn)
			}
		}
	}

	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, m := range docPath.FindAllStringSubmatch(doc, -1) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
			t.Errorf("docs/architecture.md names %s, which does not exist: got %v", m[1], err)
		}
	}

	rows := map[string]bool{}
	for _, line := range section(doc, "## Packages") {
		if m := firstCell.FindStringSubmatch(line); m != nil {
			rows[m[1]] = true
		}
	}
	pkgs := packageDirs(t, root)
	for _, p := range pkgs {
		if !rows[p] {
			t.Errorf("docs/architecture.md's Packages table has no row for %s: add one (what it owns, who may import it)", p)
		}
	}
	for p := range rows {
		if !slices.Contains(pkgs, p) {
			t.Errorf("docs/architecture.md's Packages table has a row for %s, which holds no Go file: remove the row", p)
		}
	}

	for _, line := range section(doc, "## Invariants") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "invariant" {
			continue
		}
		for _, group := range strings.Split(cells[len(cells)-2], ";") {
			names := regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(group, -1)
			if len(names) < 2 {
				t.Errorf("docs/architecture.md: invariant %q: %q is not `package` then its tests", strings.TrimSpace(cells[1]), group)
				continue
			}
			dir := names[0][1]
			if !strings.HasPrefix(dir, "tests/") {
				dir = "internal/" + dir
			}
			for _, n := range names[1:] {
				if !slices.Contains(funcs[n[1]], dir) {
					t.Errorf("docs/architecture.md: invariant %q names %s in %s, which declares no such test (got it in %v)", strings.TrimSpace(cells[1]), n[1], dir, funcs[n[1]])
				}
			}
		}
	}
}

// section is the lines of doc under heading, to the next heading.
func section(doc, heading string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case strings.HasPrefix(line, heading):
			in = true
		case in && strings.HasPrefix(line, "#"):
			return out
		case in:
			out = append(out, line)
		}
	}
	return out
}

// testFuncs maps each test and benchmark function in the tree to the
// package directories (from root, forward slashes) that declare it.
func testFuncs(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	walkGo(t, root, func(rel string, src []byte) {
		if !strings.HasSuffix(rel, "_test.go") {
			return
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			out[string(m[1])] = append(out[string(m[1])], filepath.ToSlash(filepath.Dir(rel)))
		}
	})
	return out
}

// packageDirs lists the directories under cmd/, internal/ and tests/
// holding Go files, sorted.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	walkGo(t, root, func(rel string, _ []byte) {
		dir := filepath.ToSlash(filepath.Dir(rel))
		if under(dir+"/", []string{"cmd/", "internal/", "tests/"}) {
			seen[dir] = true
		}
	})
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// walkGo calls f with each Go file under root and its contents, vendored,
// testdata and hidden folders left out.
func walkGo(t *testing.T, root string, f func(rel string, src []byte)) {
	t.Helper()
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(rel), src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
