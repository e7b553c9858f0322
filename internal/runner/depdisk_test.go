package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// TestDependencyFoldersAreFoundAndMadeBesideNextToFiles: a tree's matching
// folders, and a plain-named folder beside each Next to file, are bound,
// one escaped subdirectory each; .git, symlinks, what lies inside a
// dependency folder or too deep, and a folder with files of its own are
// not.
func TestDependencyFoldersAreFoundAndMadeBesideNextToFiles(t *testing.T) {
	ws := t.TempDir()
	deep := strings.Repeat("d/", depsMaxDepth)
	for _, f := range []string{
		"package.json",                 // node_modules beside it, made
		"web/package.json",             // likewise
		"api/.venv/lib/package.json",   // inside a dependency folder: not looked at
		"api/.venv/.keep-out-of-sight", // .venv matched, but has files: left
		"py/pyproject.toml",            // .venv beside it, made
		"svc/target/",                  // matched, empty: bound
		"packages/one/build/",          // packages/*/build: bound
		"other/build/",                 // not packages/*: not bound
		".git/node_modules/",           // never in .git
		deep + "package.json",          // too deep
	} {
		p := filepath.Join(ws, f)
		if strings.HasSuffix(f, "/") {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("{}"), 0o644)
	}
	os.MkdirAll(filepath.Join(ws, "web", "node_modules"), 0o755)
	os.MkdirAll(filepath.Join(t.TempDir(), "elsewhere"), 0o755)
	os.Symlink(t.TempDir(), filepath.Join(ws, "linked")) // followed, it would have a package.json
	os.WriteFile(filepath.Join(ws, "linked", "package.json"), []byte("{}"), 0o644)
	os.MkdirAll(filepath.Join(ws, "lib"), 0o755)
	os.WriteFile(filepath.Join(ws, "lib", "package.json"), nil, 0o644)
	os.Symlink("/etc", filepath.Join(ws, "lib", "node_modules")) // a symlink where one would be: left

	binds, notes := dependencyBinds(ws, []string{"node_modules", ".venv", "target", "packages/*/build"},
		map[string]string{"package.json": "node_modules", "pyproject.*": ".venv"})
	var got []string
	for _, b := range binds {
		if b.Disk != depsDisk || b.Target != workspaceDir+"/"+unescape(t, b.Sub) {
			t.Errorf("bind %+v: want the deps disk, its sub the escaped path of its target", b)
		}
		got = append(got, b.Sub)
	}
	want := []string{"node_modules", "packages%2Fone%2Fbuild", "py%2F.venv", "svc%2Ftarget", "web%2Fnode_modules"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("bound %q, want %q", got, want)
	}
	for _, d := range []string{"node_modules", "py/.venv"} {
		if st, err := os.Lstat(filepath.Join(ws, d)); err != nil || !st.IsDir() {
			t.Errorf("%s beside package.json was not made: %v", d, err)
		}
	}
	joined := strings.Join(notes, "\n")
	for _, n := range []string{"api/.venv stays in the Workspace: it has files of its own", "lib/node_modules stays as it is: it is not a folder"} {
		if !strings.Contains(joined, n) {
			t.Errorf("notes:\n%s\nwant %q", joined, n)
		}
	}
}

func unescape(t *testing.T, sub string) string {
	t.Helper()
	return strings.ReplaceAll(strings.ReplaceAll(sub, "%2F", "/"), "%25", "%")
}

// TestDependencyFoldersAreBoundedAndAddedToTheClonesExclude: past
// depsMaxFolders the rest stay with a note; the bound ones are added once
// to .git/info/exclude, which is not written through a symlink.
func TestDependencyFoldersAreBoundedAndAddedToTheClonesExclude(t *testing.T) {
	ws := t.TempDir()
	for i := range depsMaxFolders + 3 {
		os.MkdirAll(filepath.Join(ws, "p", strings.Repeat("x", i+1), "node_modules"), 0o755)
	}
	binds, notes := dependencyBinds(ws, []string{"node_modules"}, nil)
	if len(binds) != depsMaxFolders || len(notes) != 1 || !strings.Contains(notes[0], "first 64 dependency folders only") {
		t.Fatalf("%d binds, notes %q; want %d and a note", len(binds), notes, depsMaxFolders)
	}

	os.MkdirAll(filepath.Join(ws, ".git", "info"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "info", "exclude"), []byte("/.claude/worktrees/"), 0o644)
	two := []sandbox.DiskBind{{Target: "/workspace/web/node_modules"}, {Target: "/workspace/.venv"}}
	for range 2 {
		if err := excludeFromGit(ws, two); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(ws, ".git", "info", "exclude"))
	if got := string(b); got != "/.claude/worktrees/\n/web/node_modules/\n/.venv/\n" {
		t.Errorf("exclude holds %q, want each folder once after what was there", got)
	}

	outside := filepath.Join(t.TempDir(), "host-file")
	os.WriteFile(outside, nil, 0o644)
	os.Remove(filepath.Join(ws, ".git", "info", "exclude"))
	os.Symlink(outside, filepath.Join(ws, ".git", "info", "exclude"))
	if err := excludeFromGit(ws, two); err == nil {
		t.Error("a symlinked exclude was taken")
	}
	if b, _ := os.ReadFile(outside); len(b) != 0 {
		t.Errorf("written through the symlink: %q", b)
	}
	os.Remove(filepath.Join(ws, ".git", "info", "exclude"))
	syscall.Mkfifo(filepath.Join(ws, ".git", "info", "exclude"), 0o644)
	if err := excludeFromGit(ws, two); err == nil || !strings.Contains(err.Error(), "not a file") {
		t.Errorf("a FIFO for exclude: %v, want refused at once", err)
	}
}

// TestASandboxMadeBeforeDependencyDisksIsReplacedOnlyForThem: a Sandbox
// whose sandbox-made lacks the dependency disk is taken as it is, unless
// its Environment now has dependency folders; one made with it is stale
// exactly when its Build or resources changed.
func TestASandboxMadeBeforeDependencyDisksIsReplacedOnlyForThem(t *testing.T) {
	dir := t.TempDir()
	now := "key 0 0 " + depsDisk
	for _, c := range []struct {
		was       string
		wantsDeps bool
		stale     bool
	}{
		{"key 0 0", false, false},
		{"key 0 0", true, true},
		{"old 0 0", false, true},
		{now, true, false},
		{now, false, false},
		{"key 2 0 " + depsDisk, false, true},
		{"", false, false}, // no sandbox-made: made before it was kept
		{"", true, true},
	} {
		os.Remove(filepath.Join(dir, sandboxMade))
		if c.was != "" {
			os.WriteFile(filepath.Join(dir, sandboxMade), []byte(c.was), 0o600)
		}
		if got := stale(dir, now, c.wantsDeps); got != c.stale {
			t.Errorf("made %q, wanting deps %v: stale %v, want %v", c.was, c.wantsDeps, got, c.stale)
		}
	}
}

// TestMappedTellsTheFoldersAPatternStillMapsTo: a dependency disk's entry
// is kept while a folder pattern matches its path (or name) or it ends in
// a Next to file's folder; anything else, names dependencyBinds never gives
// among them, is not.
func TestMappedTellsTheFoldersAPatternStillMapsTo(t *testing.T) {
	folders := []string{".venv", "packages/*/build"}
	nextTo := map[string]string{"package.json": "node_modules"}
	for _, c := range []struct {
		sub  string
		want bool
	}{
		{"node_modules", true},
		{"web%2Fnode_modules", true},
		{"py%2F.venv", true},
		{"packages%2Fone%2Fbuild", true},
		{"other%2Fbuild", false},
		{"target", false},
		{"svc%2Ftarget", false},
		{"web/node_modules", false}, // not escaped: not a name of ours
		{"%zz", false},
	} {
		if got := mapped(c.sub, folders, nextTo); got != c.want {
			t.Errorf("mapped(%q) = %v, want %v", c.sub, got, c.want)
		}
	}
}

// TestStaleDependencyFoldersArePrunedAtTheNextBoot: at the first boot after
// the patterns change, the dependency disk's folders no pattern maps to
// any more are deleted, with a line saying which and how much; those a
// pattern still maps to stay. With the patterns as they were, nothing is
// looked at again; with none left, every folder goes.
func TestStaleDependencyFoldersArePrunedAtTheNextBoot(t *testing.T) {
	be, base := crunBackend(t)
	ctx := context.Background()
	r := &Runner{backend: be, log: slog.New(slog.DiscardHandler)}
	const id = "prune"
	if err := be.Create(ctx, sandbox.Spec{ID: id, Layers: []string{base}, Disks: []sandbox.Disk{{Name: depsDisk, Target: depsDir}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Remove(ctx, id) })
	sh := func(script string) string {
		t.Helper()
		if err := be.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		p, err := be.Exec(ctx, id, sandbox.Cmd{Args: []string{"sh", "-c", script}, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(); err != nil || code != 0 {
			t.Fatalf("%s: exit %d, %v: %s", script, code, err, out.String())
		}
		if err := be.Stop(ctx, id); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	sh("cd " + depsDir + " && mkdir web%2Fnode_modules .venv target && head -c 1048576 /dev/zero > target/f")

	var lines []string
	logf := func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }
	dir := t.TempDir()
	env := &protocol.Environment{EnvironmentSettings: protocol.EnvironmentSettings{DependencyFolders: []string{".venv"}, NextTo: map[string]string{"package.json": "node_modules"}}}
	pruneDependencies(ctx, r.backend, r.log, id, dir, env, logf)
	if len(lines) != 1 || !strings.Contains(lines[0], "deleted 1 folder(s) no pattern maps to any more") || !strings.Contains(lines[0], "(target 1.0 MiB)") {
		t.Errorf("the start log: %q, want one line naming target and its 1.0 MiB", lines)
	}
	if got := sh("ls -A " + depsDir + " && mkdir " + depsDir + "/stray"); got != ".venv\nweb%2Fnode_modules" {
		t.Errorf("after pruning: %q, want the folders a pattern maps to", got)
	}

	lines = nil
	pruneDependencies(ctx, r.backend, r.log, id, dir, env, logf)
	if got := sh("ls -A " + depsDir); len(lines) != 0 || got != ".venv\nstray\nweb%2Fnode_modules" {
		t.Errorf("with the patterns unchanged: logged %q, left %q; want nothing done", lines, got)
	}

	pruneDependencies(ctx, r.backend, r.log, id, dir, nil, logf)
	if got := sh("ls -A " + depsDir); len(lines) != 1 || !strings.Contains(lines[0], "deleted 3 folder(s)") || got != "" {
		t.Errorf("with no patterns: logged %q, left %q; want every folder deleted", lines, got)
	}
}
