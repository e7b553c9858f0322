package cli

import (
	"context"
	"fmt"
	"io"

	"kndl.dev/kndl/internal/api"
)

// sessionDiff prints a Session's changes: its commits, each file with its
// counts, then the files' diffs as git prints them.
func sessionDiff(ctx context.Context, io IO, args []string) error {
	fs := Flags(io, "diff")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, c, err := ParseFor(fs, args, 1)
	if err != nil {
		return err
	}
	ch, err := c.Changes(ctx, pos[0])
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(io, ch)
	}
	printChanges(io.Stdout, ch)
	return nil
}

// printChanges prints Changes for a person.
func printChanges(w io.Writer, ch api.Changes) {
	fmt.Fprintf(w, "Against %s (%s)", or(ch.Base, "its start"), shortCommit(ch.BaseCommit))
	if ch.Branch != "" {
		fmt.Fprintf(w, ", on %s", ch.Branch)
	}
	fmt.Fprintf(w, ": %d files changed, %d commits\n", len(ch.Files), len(ch.Commits))
	for _, cm := range ch.Commits {
		pushed := "not pushed"
		if cm.Pushed {
			pushed = "pushed"
		}
		fmt.Fprintf(w, "  %s  %s  (%s)\n", shortCommit(cm.Hash), oneLine(cm.Subject, 60), pushed)
	}
	for _, f := range ch.Files {
		name := f.Path
		if f.OldPath != "" {
			name = f.OldPath + " -> " + f.Path
		}
		fmt.Fprintf(w, "  %-9s %s  +%d -%d\n", f.Status, name, f.Additions, f.Deletions)
	}
	for _, f := range ch.Files {
		if f.Diff != "" {
			fmt.Fprintf(w, "\n%s", f.Diff)
		}
	}
	if ch.Cut != "" {
		fmt.Fprintf(w, "\n%s\n", ch.Cut)
	}
}

func shortCommit(h string) string { return h[:min(len(h), 12)] }
