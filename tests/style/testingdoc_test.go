package style

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTheTestingDocNamesWhereEachMovedTestWent: docs/testing.md stays
// under maxDocBytes; each row of its "Moved from e2e" table names a test
// tests/e2e no longer declares (moved, not copied) and, in `package` then
// its tests groups, tests that exist in those packages, so no scenario is
// lost; every other test it names exists.
func TestTheTestingDocNamesWhereEachMovedTestWent(t *testing.T) {
	root := filepath.Join("..", "..")
	funcs := testFuncs(t, root)
	b, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if len(b) > maxDocBytes {
		t.Errorf("docs/testing.md is %d bytes, want at most %d", len(b), maxDocBytes)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	gone := map[string]bool{}
	rows := 0
	for _, line := range section(doc, "## Moved from e2e") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "e2e test (gone)" {
			continue
		}
		rows++
		m := firstCell.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("docs/testing.md: row %q: the first cell is not one e2e test's name in backquotes", line)
			continue
		}
		moved := m[1]
		gone[moved] = true
		if slices.Contains(funcs[moved], "tests/e2e") {
			t.Errorf("docs/testing.md says %s moved from tests/e2e, which still declares it: delete it there", moved)
		}
		groups := strings.Split(cells[2], ";")
		for _, group := range groups {
			names := quoted.FindAllStringSubmatch(group, -1)
			if len(names) < 2 {
				t.Errorf("docs/testing.md: %s: %q is not `package` then its tests", moved, group)
				continue
			}
			dir := names[0][1]
			for _, n := range names[1:] {
				if !slices.Contains(funcs[n[1]], dir) {
					t.Errorf("docs/testing.md: %s went to %s in %s, which declares no such test (got it in %v)", moved, n[1], dir, funcs[n[1]])
				}
			}
		}
	}
	if rows == 0 {
		t.Error("docs/testing.md has no \"Moved from e2e\" table rows")
	}
	for _, fn := range docTest.FindAllString(doc, -1) {
		if !gone[fn] && len(funcs[fn]) == 0 {
			t.Errorf("docs/testing.md names %s, which no _test.go file declares", fn)
		}
	}
}
