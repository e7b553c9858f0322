package security

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"kndl.dev/kndl/internal/auth"
)

// repoRoot is the module's root, from this file's place in it.
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// TestTokensAreComparedInConstantTimeThroughOneFunction: comparing a token's
// hash with a wrong one of equal length takes as long wherever they differ,
// and no code but internal/auth compares secrets (crypto/subtle, hmac.Equal
// and bytes.Equal appear nowhere else).
func TestTokensAreComparedInConstantTimeThroughOneFunction(t *testing.T) {
	root := repoRoot(t)
	for _, dir := range []string{"internal", "cmd"} {
		filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if filepath.Dir(rel) == filepath.Join("internal", "auth") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "crypto/subtle" {
					t.Errorf("%s imports %s: compare secrets with auth.Equal", rel, p)
				}
			}
			if strings.Contains(string(src), "bytes.Equal(") {
				t.Errorf("%s uses bytes.Equal, which returns at the first difference: compare secrets with auth.Equal", rel)
			}
			// An HMAC may be made anywhere (the audit chain's); it is
			// compared through auth.Equal too.
			if strings.Contains(string(src), "hmac.Equal(") {
				t.Errorf("%s uses hmac.Equal: compare secrets with auth.Equal", rel)
			}
			return nil
		})
	}

	// Timing: big inputs make a difference measurable, as bytes.Equal's
	// early return would show at once.
	const size = 1 << 20
	a := make([]byte, size)
	same := make([]byte, size)
	first := make([]byte, size)
	last := make([]byte, size)
	first[0], last[size-1] = 1, 1
	if !auth.Equal(a, same) || auth.Equal(a, first) || auth.Equal(a, last) {
		t.Fatal("auth.Equal gets equality wrong")
	}
	if raceEnabled {
		t.Skip("timing is not measured under the race detector")
	}
	// The fastest of many interleaved runs of each, so load on the
	// machine hits all three alike.
	best := []time.Duration{time.Hour, time.Hour, time.Hour}
	for range 60 {
		for i, b := range [][]byte{same, first, last} {
			start := time.Now()
			auth.Equal(a, b)
			best[i] = min(best[i], time.Since(start))
		}
	}
	tSame, tFirst, tLast := best[0], best[1], best[2]
	lo, hi := min(tSame, tFirst, tLast), max(tSame, tFirst, tLast)
	t.Logf("1 MiB: equal %v, differing at the first byte %v, at the last %v", tSame, tFirst, tLast)
	if float64(hi) > 1.5*float64(lo) {
		t.Fatalf("auth.Equal's time depends on where inputs differ: equal %v, first byte %v, last byte %v", tSame, tFirst, tLast)
	}
}
