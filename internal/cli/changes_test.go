package cli

import (
	"bytes"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/protocol"
)

// TestDiffPrintsTheCommitsEachFileThenTheDiffsAndTheCut: kndl diff's text
// says what it is against, lists the commits with whether each is pushed
// and the files with their counts (a rename as old -> new), then prints
// each diff as git does and the note of a cut diff last.
func TestDiffPrintsTheCommitsEachFileThenTheDiffsAndTheCut(t *testing.T) {
	ch := api.Changes{Base: "main", BaseCommit: "0123456789abcdef0123", Branch: "fix",
		Files: []protocol.ChangedFile{
			{Path: "a.go", Status: "modified", Additions: 1, Deletions: 1, Diff: "diff --git a/a.go b/a.go\n-old\n+new\n"},
			{Path: "b.go", OldPath: "old.go", Status: "renamed", Omitted: true},
		},
		Commits: []protocol.Commit{{Hash: "fedcba9876543210", Subject: "Fix it", Pushed: true}, {Hash: "1111111111111111", Subject: "Try"}},
		Cut:     "The diff is over 2 MiB, so it stops here.",
	}
	var out bytes.Buffer
	printChanges(&out, ch)
	want := []string{
		"Against main (0123456789ab), on fix: 2 files changed, 2 commits",
		"  fedcba987654  Fix it  (pushed)",
		"  111111111111  Try  (not pushed)",
		"  modified  a.go  +1 -1",
		"  renamed   old.go -> b.go  +0 -0",
		"",
		"diff --git a/a.go b/a.go",
		"-old",
		"+new",
		"",
		"The diff is over 2 MiB, so it stops here.",
	}
	if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}
