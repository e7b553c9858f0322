package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
)

// A Sandbox's dependency disk holds all its dependency folders, one
// subdirectory each, named by the folder's path from /workspace escaped
// (web/node_modules is web%2Fnode_modules), so no two collide. The
// backend binds them at each boot (sandbox.DiskBind), found on the host's
// Workspace while the Sandbox is stopped: the Sandbox's seccomp profile
// refuses mount, so nothing inside it could, and a stopped Sandbox cannot
// change the tree while it is read. The disk is kept like the others: by
// a sleep, and into a new Sandbox on any version, the patterns changed
// or not. A folder not bound at a boot stays on it, unbound, while a
// pattern still maps to it (its package.json may come back with a
// branch); at the first boot after the patterns change, the folders no
// pattern maps to any more are deleted (pruneDependencies).

// depsDisk is the dependency disk's name; depsDir is where the Sandbox
// sees the whole of it.
const (
	depsDisk = "deps"
	depsDir  = "/var/lib/kndl/deps"
)

// Bounds on the search of a Workspace for dependency folders, so a huge
// tree does not hold up a boot.
const (
	depsMaxDepth   = 8
	depsMaxEntries = 100000
	depsMaxFolders = 64
)

// wantsDeps reports an Environment with dependency folders.
func wantsDeps(env *protocol.Environment) bool {
	return env != nil && len(env.DependencyFolders)+len(env.NextTo) > 0
}

// dependencyBinds finds the dependency folders of the Workspace at ws:
// every folder the patterns match (a pattern without a slash matches a
// folder's name, one with slashes its path from ws), and where nextTo's
// folder would be beside each file its pattern matches, made empty so it
// can be bound. It skips .git, follows no symlink, looks no deeper than
// depsMaxDepth nor inside a dependency folder, and leaves as it is a
// folder that has files of its own in the Workspace, which the disk would
// hide. notes say what it skipped.
func dependencyBinds(ws string, folders []string, nextTo map[string]string) (binds []sandbox.DiskBind, notes []string) {
	files := slices.Sorted(maps.Keys(nextTo))
	found := map[string]bool{}
	entries := 0
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == ws {
			return nil
		}
		if entries++; entries > depsMaxEntries {
			notes = append(notes, fmt.Sprintf("dependency disk: stopped looking for dependency folders after %d entries of the Workspace", depsMaxEntries))
			return fs.SkipAll
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, ws+string(filepath.Separator)))
		switch {
		case d.IsDir() && d.Name() == ".git":
			return fs.SkipDir
		case d.IsDir() && matchAny(folders, rel, d.Name()):
			found[rel] = true
			return fs.SkipDir
		case d.IsDir() && strings.Count(rel, "/")+1 >= depsMaxDepth:
			return fs.SkipDir
		case d.Type().IsRegular():
			for _, f := range files {
				if ok, _ := path.Match(f, d.Name()); ok {
					found[path.Join(path.Dir(rel), nextTo[f])] = true
				}
			}
		}
		return nil
	})
	for _, rel := range slices.Sorted(maps.Keys(found)) {
		sub := url.PathEscape(rel)
		p := filepath.Join(ws, filepath.FromSlash(rel))
		st, err := os.Lstat(p)
		switch {
		case len(binds) == depsMaxFolders:
			notes = append(notes, fmt.Sprintf("dependency disk: bound the first %d dependency folders only; %s and those after it stay in the Workspace", depsMaxFolders, rel))
			return binds, notes
		case len(sub) > 255:
			notes = append(notes, fmt.Sprintf("dependency disk: %s stays in the Workspace: its path is too long to name on the disk", rel))
			continue
		case err == nil && !st.IsDir():
			notes = append(notes, fmt.Sprintf("dependency disk: %s stays as it is: it is not a folder", rel))
			continue
		case err == nil && !emptyDir(p):
			notes = append(notes, fmt.Sprintf("dependency disk: %s stays in the Workspace: it has files of its own there, which the disk would hide", rel))
			continue
		case err != nil:
			// Its parent is a folder the search walked, not a symlink.
			if err := os.Mkdir(p, 0o755); err != nil {
				notes = append(notes, fmt.Sprintf("dependency disk: %s stays in the Workspace: %v", rel, err))
				continue
			}
		}
		binds = append(binds, sandbox.DiskBind{Disk: depsDisk, Sub: sub, Target: workspaceDir + "/" + rel})
	}
	return binds, notes
}

// matchAny reports whether a pattern matches: one with a slash against
// rel, one without against name.
func matchAny(patterns []string, rel, name string) bool {
	for _, p := range patterns {
		s := name
		if strings.Contains(p, "/") {
			s = rel
		}
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// depsPruned is the file of a Session's directory holding the patterns
// its dependency disk was last pruned for.
const depsPruned = "deps-pruned"

// pruneDependencies deletes, at the first boot after the Environment's
// patterns changed (or its first), each folder of a stopped Sandbox's
// dependency disk that no pattern maps to any more, saying in the start
// log and the Runner's what went and how much it held. A prune that fails
// is said and the boot goes on: the folders stay, unbound, as before.
func pruneDependencies(ctx context.Context, b sandbox.Backend, log *slog.Logger, id, dir string, env *protocol.Environment, logf func(string, ...any)) {
	var folders []string
	var nextTo map[string]string
	if env != nil {
		folders, nextTo = env.DependencyFolders, env.NextTo
	}
	key, _ := json.Marshal(struct {
		Folders []string
		NextTo  map[string]string // marshalled in key order
	}{folders, nextTo})
	if b, err := os.ReadFile(filepath.Join(dir, depsPruned)); err == nil && string(b) == string(key) {
		return
	}
	pruned, err := b.PruneDisk(ctx, id, depsDisk, func(sub string) bool { return mapped(sub, folders, nextTo) })
	switch {
	case errors.Is(err, sandbox.ErrNotFound):
		return // a Sandbox made before dependency disks
	case err != nil:
		logf("dependency disk: could not delete the folders no pattern maps to any more: %v", err)
		return
	}
	if len(pruned) > 0 {
		var total int64
		var names []string
		for _, p := range pruned {
			total += p.Bytes
			rel, _ := url.PathUnescape(p.Name)
			names = append(names, fmt.Sprintf("%s %s", rel, mib(p.Bytes)))
		}
		logf("dependency disk: deleted %d folder(s) no pattern maps to any more, %s in all (%s)", len(pruned), mib(total), strings.Join(names, ", "))
		log.Info("pruned a dependency disk", "sandbox", id, "folders", len(pruned), "bytes", total)
	}
	if err := writeAtomic(filepath.Join(dir, depsPruned), key); err != nil {
		logf("dependency disk: %v", err)
	}
}

// mapped reports whether a dependency disk's entry is a folder a pattern
// maps to: a name dependencyBinds gives (the escaped path from
// /workspace) whose path a dependency folder pattern matches, or which
// ends in a Next to file's folder.
func mapped(sub string, folders []string, nextTo map[string]string) bool {
	rel, err := url.PathUnescape(sub)
	if err != nil || url.PathEscape(rel) != sub {
		return false
	}
	if matchAny(folders, rel, path.Base(rel)) {
		return true
	}
	for _, f := range nextTo {
		if rel == f || strings.HasSuffix(rel, "/"+f) {
			return true
		}
	}
	return false
}

// mib says a number of bytes in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

func emptyDir(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

// excludeFromGit adds each bound folder to the Workspace's
// .git/info/exclude, the clone's own list, so a folder the Repo does not
// ignore is no noise in git status; the Repo stays as it is. The
// Workspace is the Sandbox's to write, so nothing on the way is followed
// if it is a symlink.
func excludeFromGit(ws string, binds []sandbox.DiskBind) error {
	info := filepath.Join(ws, ".git", "info")
	for _, d := range []string{filepath.Dir(info), info} {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			return nil // no clone of its own (or a worktree's .git file): nothing to add to
		}
	}
	// Non-blocking and then checked, so a FIFO left there holds up nothing.
	f, err := os.OpenFile(filepath.Join(info, "exclude"), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a file", f.Name())
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		have[strings.TrimSpace(l)] = true
	}
	var add strings.Builder
	if len(b) > 0 && !strings.HasSuffix(string(b), "\n") {
		add.WriteString("\n")
	}
	for _, bd := range binds {
		if l := "/" + strings.TrimPrefix(bd.Target, workspaceDir+"/") + "/"; !have[l] {
			add.WriteString(l + "\n")
		}
	}
	if strings.TrimSpace(add.String()) == "" {
		return nil
	}
	_, err = f.WriteString(add.String())
	return err
}

// bindDependencies sets where a stopped Sandbox's dependency disk is bound
// at its next boot, from the Workspace at ws, saying in the log how many
// folders and what it skipped.
func bindDependencies(ctx context.Context, b sandbox.Backend, id, ws string, env *protocol.Environment, logf func(string, ...any)) error {
	var binds []sandbox.DiskBind
	if wantsDeps(env) {
		var notes []string
		binds, notes = dependencyBinds(ws, env.DependencyFolders, env.NextTo)
		for _, n := range notes {
			logf("%s", n)
		}
		var names []string
		for _, b := range binds[:min(len(binds), 5)] {
			names = append(names, strings.TrimPrefix(b.Target, workspaceDir+"/"))
		}
		if len(binds) > 5 {
			names = append(names, "…")
		}
		plural := "s"
		if len(binds) == 1 {
			plural = ""
		}
		logf("dependency disk: bound %d folder%s%s", len(binds), plural, strings.TrimSuffix(" ("+strings.Join(names, ", ")+")", " ()"))
		if err := excludeFromGit(ws, binds); err != nil {
			logf("dependency disk: could not add the folders to .git/info/exclude: %v", err)
		}
	}
	if err := b.SetDiskBinds(ctx, id, binds); err != nil {
		return fmt.Errorf("bind the dependency folders: %w", err)
	}
	return nil
}
