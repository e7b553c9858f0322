package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// clonedWorkspace clones a Repo with one file, readme.md, as a Session's
// Workspace, and returns the Workspace and its base file.
func clonedWorkspace(t *testing.T) (ws, base string) {
	t.Helper()
	src := gitRepo(t)
	os.WriteFile(filepath.Join(src, "readme.md"), []byte("hello\n"), 0o644)
	inGit(t, src, "add", "readme.md")
	inGit(t, src, "commit", "-q", "-m", "readme")
	dir := t.TempDir()
	ws = filepath.Join(dir, "workspace")
	if err := cloneWorkspace(context.Background(), loopback, src, "", ws, func(string) {}); err != nil {
		t.Fatal(err)
	}
	return ws, filepath.Join(dir, baseFile)
}

// inGit runs git as the Sandbox would, with the Workspace's own config.
func inGit(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// workspaceChangesFrom computes the Changes as the Runner does: the
// confined task over the Workspace, as root.
func workspaceChangesFrom(t testing.TB, ws, base string) (protocol.Changes, error) {
	t.Helper()
	testenv.RequireRoot(t)
	return confinedChanges(context.Background(), ws, base)
}

func changesOf(t *testing.T, ws, base string) protocol.Changes {
	t.Helper()
	ch, err := workspaceChangesFrom(t, ws, base)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func fileOf(ch protocol.Changes, path string) (protocol.ChangedFile, bool) {
	for _, f := range ch.Files {
		if f.Path == path {
			return f, true
		}
	}
	return protocol.ChangedFile{}, false
}

func TestTheChangesShowCommittedUncommittedAndNewFilesAndWhichCommitsArePushed(t *testing.T) {
	ws, base := clonedWorkspace(t)
	start := inGit(t, ws, "rev-parse", "HEAD")
	inGit(t, ws, "checkout", "-q", "-b", "feature")
	os.WriteFile(filepath.Join(ws, "readme.md"), []byte("hello\nworld\n"), 0o644)
	inGit(t, ws, "commit", "-q", "-am", "say world")
	pushed := inGit(t, ws, "rev-parse", "HEAD")
	inGit(t, ws, "update-ref", "refs/remotes/origin/feature", pushed) // as a push leaves it
	os.WriteFile(filepath.Join(ws, "lib.go"), []byte("package lib\n"), 0o644)
	inGit(t, ws, "add", "lib.go")
	inGit(t, ws, "commit", "-q", "-m", "add lib")
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("not committed\n"), 0o644)

	ch := changesOf(t, ws, base)
	if ch.BaseCommit != start || ch.Branch != "feature" {
		t.Errorf("base %s, branch %q; want %s, feature", ch.BaseCommit, ch.Branch, start)
	}
	want := map[string]struct {
		status string
		line   string
	}{"readme.md": {"modified", "+world\n"}, "lib.go": {"added", "+package lib\n"}, "notes.txt": {"added", "+not committed\n"}}
	if len(ch.Files) != len(want) {
		t.Fatalf("files %+v, want %v", ch.Files, want)
	}
	for path, w := range want {
		f, ok := fileOf(ch, path)
		if !ok || f.Status != w.status || !strings.Contains(f.Diff, w.line) || f.Additions != 1 || !strings.HasPrefix(f.Diff, "diff --git a/"+path) {
			t.Errorf("%s: got %+v, want %s with %q", path, f, w.status, w.line)
		}
	}
	if len(ch.Commits) != 2 || ch.Commits[0].Subject != "add lib" || ch.Commits[0].Pushed || ch.Commits[1].Hash != pushed || !ch.Commits[1].Pushed {
		t.Errorf("commits %+v, want add lib (not pushed) then say world (pushed)", ch.Commits)
	}
	if st := inGit(t, ws, "status", "--porcelain"); st != "?? notes.txt" {
		t.Errorf("the Workspace's index changed: status %q", st)
	}
}

// TestTheChangesRunNothingTheWorkspaceConfigures: the Sandbox writes the
// Workspace's .git, so a filter, diff driver, textconv, fsmonitor, pager
// or hook it sets there would be a command the host runs. None runs, and
// the diff is git's own.
func TestTheChangesRunNothingTheWorkspaceConfigures(t *testing.T) {
	ws, base := clonedWorkspace(t)
	ran := filepath.Join(t.TempDir(), "RAN")
	evil := fmt.Sprintf("sh -c 'echo %%s >> %s'", ran)
	cfg := fmt.Sprintf(`[filter "evil"]
	clean = %[1]s
	smudge = %[1]s
	process = %[1]s
	required = true
[diff "evil"]
	command = %[1]s
	textconv = %[1]s
[diff]
	external = %[1]s
[core]
	fsmonitor = %[1]s
	pager = %[1]s
	attributesFile = /etc/passwd
`, evil)
	f, _ := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(cfg)
	f.Close()
	os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte("* filter=evil diff=evil\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, ".git", "info"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "info", "attributes"), []byte("* filter=evil diff=evil\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	for _, h := range []string{"post-index-change", "pre-commit", "post-checkout"} {
		os.WriteFile(filepath.Join(ws, ".git", "hooks", h), []byte("#!/bin/sh\necho hook >> "+ran+"\n"), 0o755)
	}
	os.WriteFile(filepath.Join(ws, "readme.md"), []byte("hello\nchanged\n"), 0o644)

	ch := changesOf(t, ws, base)
	if b, err := os.ReadFile(ran); err == nil {
		t.Fatalf("the Workspace's config ran a command on the host: %s", b)
	}
	f2, ok := fileOf(ch, "readme.md")
	if !ok || !strings.Contains(f2.Diff, "+changed\n") || !strings.Contains(f2.Diff, "@@") {
		t.Errorf("readme.md: got %+v, want git's own diff with +changed", f2)
	}
}

func TestTheChangesRefuseAGitDirectoryThatLeadsOutOfTheWorkspace(t *testing.T) {
	ws, base := clonedWorkspace(t)
	other, _ := clonedWorkspace(t)
	objects := filepath.Join(ws, ".git", "objects")
	os.WriteFile(filepath.Join(objects, "info", "alternates"), []byte(filepath.Join(other, ".git", "objects")+"\n"), 0o644)
	if _, err := workspaceChangesFrom(t, ws, base); err == nil || !strings.Contains(err.Error(), "alternates") {
		t.Errorf("alternates: got %v, want a refusal naming them", err)
	}
	os.Remove(filepath.Join(objects, "info", "alternates"))
	os.Rename(objects, objects+".real")
	os.Symlink(filepath.Join(other, ".git", "objects"), objects)
	if _, err := workspaceChangesFrom(t, ws, base); err == nil || !strings.Contains(err.Error(), "no git repository of its own") {
		t.Errorf("objects as a link: got %v, want a refusal", err)
	}
}

func TestAChangesDiffPast2MiBIsCutWithANoteSayingHowToSeeTheRest(t *testing.T) {
	ws, base := clonedWorkspace(t)
	line := strings.Repeat("x", 99) + "\n"
	for i := range 5 { // 5 files of 600 KiB each: the fourth crosses 2 MiB
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("big%d.txt", i)), []byte(strings.Repeat(line, 6<<10)), 0o644)
	}
	ch := changesOf(t, ws, base)
	total := 0
	for _, f := range ch.Files {
		total += len(f.Diff)
	}
	if total > protocol.DiffMax {
		t.Errorf("diff text %d bytes, over %d", total, protocol.DiffMax)
	}
	if len(ch.Files) != 5 || ch.Files[2].Omitted || !ch.Files[3].Omitted || !ch.Files[4].Omitted || ch.Files[3].Diff != "" {
		t.Errorf("files: want the first three whole and the last two listed without a diff; got %d files, omitted %v %v %v", len(ch.Files), ch.Files[2].Omitted, ch.Files[3].Omitted, ch.Files[4].Omitted)
	}
	if !strings.Contains(ch.Cut, "over 2 MiB") || !strings.Contains(ch.Cut, "2 of 5 files") || !strings.Contains(ch.Cut, "git diff "+ch.BaseCommit[:12]) {
		t.Errorf("cut note %q", ch.Cut)
	}
}

func TestAWorkspaceClonedBeforeItsBaseWasRecordedSaysSo(t *testing.T) {
	ws, base := clonedWorkspace(t)
	os.Remove(base)
	if _, err := workspaceChangesFrom(t, ws, base); err == nil || !strings.Contains(err.Error(), "recorded where it starts") {
		t.Errorf("got %v", err)
	}
}

// TestTheRunnerAnswersSessionDiffOverAStreamFromAnAsleepSessionsWorkspace:
// the protocol's round trip. The Hub asks session.diff of a Session that
// does not run here (asleep); the Runner answers with the size and sends
// that many bytes of the Workspace's Changes as JSON on the stream it
// dials back.
func TestTheRunnerAnswersSessionDiffOverAStreamFromAnAsleepSessionsWorkspace(t *testing.T) {
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	home := t.TempDir()
	ws, _ := clonedWorkspace(t)
	dir := filepath.Join(home, "sessions", id)
	os.MkdirAll(filepath.Dir(dir), 0o755)
	if err := os.Rename(filepath.Dir(ws), dir); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "workspace", "readme.md"), []byte("hello\nagain\n"), 0o644)
	bin := filepath.Join(t.TempDir(), "kndl")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)

	streamed := make(chan []byte, 1)
	hub, hubConn := testHub(t, func(r *http.Request, c *websocket.Conn) {
		b, _ := io.ReadAll(websocket.NetConn(r.Context(), c, websocket.MessageBinary))
		streamed <- b
	})
	r, err := New(Config{HubURL: hub.URL, Token: "kndlr_test", Home: home, Binary: bin}, noSandboxes{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	conn := <-hubConn
	testenv.Eventually(t, testenv.WaitShort, "the Runner connected", r.Connected)

	var info protocol.SessionDiffInfo
	if err := conn.Request(ctx, protocol.TypeSessionDiff, protocol.SessionDiff{SessionID: id, Stream: "s1"}, &info); err != nil {
		t.Fatalf("session.diff: %v", err)
	}
	var data []byte
	select {
	case data = <-streamed:
	case <-time.After(testenv.WaitShort):
		t.Fatal("no stream")
	}
	var ch protocol.Changes
	if int64(len(data)) != info.Size || json.Unmarshal(data, &ch) != nil {
		t.Fatalf("streamed %d bytes, told %d: %.200s", len(data), info.Size, data)
	}
	if len(ch.Files) != 1 || ch.Files[0].Path != "readme.md" || !strings.Contains(ch.Files[0].Diff, "+again\n") {
		t.Errorf("changes %+v, want readme.md with +again", ch)
	}
	err = conn.Request(ctx, protocol.TypeSessionDiff, protocol.SessionDiff{SessionID: "9c9f074e-a843-418d-ac33-25c5f87e7797", Stream: "s2"}, nil)
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("a Session with no Workspace here: got %v, want not found", err)
	}
}

// BenchmarkWorkspaceChanges is the Runner's part of the Changes tab's
// time to show, for a Workspace of 5,000 files with 50 changed: 40
// edited (one committed) and 10 new.
func BenchmarkWorkspaceChanges(b *testing.B) {
	testenv.RequireCommand(b, "git")
	src := filepath.Join(b.TempDir(), "src")
	inGit(b, ".", "init", "-q", src)
	body := strings.Repeat("func f() { return a + b } // a line of code\n", 40)
	for i := range 5000 {
		p := filepath.Join(src, fmt.Sprintf("pkg%02d", i/250), fmt.Sprintf("file%04d.go", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(body), 0o644)
	}
	inGit(b, src, "add", ".")
	inGit(b, src, "commit", "-q", "-m", "5000 files")
	dir := b.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := cloneWorkspace(context.Background(), loopback, src, "", ws, func(string) {}); err != nil {
		b.Fatal(err)
	}
	for i := range 40 {
		p := filepath.Join(ws, fmt.Sprintf("pkg%02d", i*5/250), fmt.Sprintf("file%04d.go", i*5))
		os.WriteFile(p, []byte(strings.Replace(body, "a + b", "a - b", 3)), 0o644)
	}
	inGit(b, ws, "commit", "-q", "-am", "edit 40 files")
	for i := range 10 {
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("new%02d.go", i)), []byte(body), 0o644)
	}
	base := filepath.Join(dir, baseFile)
	commit, branch, err := readBase(base)
	if err != nil {
		b.Fatal(err)
	}
	// confined is what the Runner runs; in-process, the same git runs
	// without the confinement, the reference its cost is read against.
	for _, bc := range []struct {
		name string
		run  func() (protocol.Changes, error)
	}{
		{"confined", func() (protocol.Changes, error) { return workspaceChangesFrom(b, ws, base) }},
		{"in-process", func() (protocol.Changes, error) { return workspaceChanges(context.Background(), ws, commit, branch) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var ch protocol.Changes
			for b.Loop() {
				var err error
				ch, err = bc.run()
				if err != nil || len(ch.Files) != 50 || len(ch.Commits) != 1 {
					b.Fatalf("%d files, %d commits, %v", len(ch.Files), len(ch.Commits), err)
				}
			}
			data, _ := json.Marshal(ch)
			b.ReportMetric(float64(len(data)), "json-bytes")
		})
	}
}

func TestARenamedFileShowsWithItsOldPathAndADeletedOneAsDeleted(t *testing.T) {
	ws, base := clonedWorkspace(t)
	os.WriteFile(filepath.Join(ws, "keep.txt"), []byte(strings.Repeat("the same line\n", 20)), 0o644)
	inGit(t, ws, "add", "keep.txt")
	inGit(t, ws, "commit", "-q", "-m", "keep")
	inGit(t, ws, "mv", "keep.txt", "kept.txt")
	inGit(t, ws, "rm", "-q", "readme.md")
	ch := changesOf(t, ws, base)
	var got []string
	for _, f := range ch.Files {
		got = append(got, f.Status+" "+f.OldPath+" "+f.Path)
	}
	// keep.txt is new since the base, so it is added as kept.txt.
	if strings.Join(got, ",") != "added  kept.txt,deleted  readme.md" {
		t.Errorf("files %q", got)
	}
	inGit(t, ws, "commit", "-q", "-m", "move")
	os.WriteFile(filepath.Join(ws, "moved.md"), []byte("hello\n"), 0o644)
	ch = changesOf(t, ws, base)
	if f, ok := fileOf(ch, "moved.md"); !ok || f.Status != "renamed" || f.OldPath != "readme.md" || !strings.Contains(f.Diff, "rename from readme.md") {
		t.Errorf("an untracked copy of a deleted file: %+v, want renamed from readme.md", ch.Files)
	}
}

// TestTheChangesRunNothingAndReadNothingOutsideTheWorkspace: what the
// Sandbox leaves in its Workspace for the Runner's git, as root on the
// host the Runner is, made by the Sandbox's user (uid 1000 inside, so
// 1000 on disk through its idmapped Workspace):
//   - a nested repository recorded as a gitlink, whose own config sets a
//     clean filter on a touched tracked file (git status in it would run
//     it);
//   - a repository linked by a .git file, whose config sets fsmonitor;
//   - objects/ab, or objects/pack, a link into another Session's
//     Workspace, with a ref naming that Session's commit.
//
// Nothing runs on the host, git asks nothing of a nested repository, and
// nothing of the other Workspace shows.
func TestTheChangesRunNothingAndReadNothingOutsideTheWorkspace(t *testing.T) {
	testenv.RequireRoot(t)
	ran := filepath.Join(t.TempDir(), "RAN")
	// Quoted whole: a ; starts a comment in a git config.
	evil := func(what string) string { return fmt.Sprintf(`"sh -c 'echo %s >> %s; cat'"`, what, ran) }

	// Another Session's Workspace, with a commit of its own.
	other, _ := clonedWorkspace(t)
	os.WriteFile(filepath.Join(other, "secret.txt"), []byte("theirs\n"), 0o644)
	inGit(t, other, "add", "secret.txt")
	inGit(t, other, "commit", "-q", "-m", "SECRET OF ANOTHER SESSION")
	theirs := inGit(t, other, "rev-parse", "HEAD")

	for _, link := range []string{"objects/ab", "objects/pack"} {
		t.Run(strings.ReplaceAll(link, "/", "-"), func(t *testing.T) {
			ws, base := clonedWorkspace(t)
			dotGit := filepath.Join(ws, ".git")

			inGit(t, ws, "init", "-q", "nested")
			nested := filepath.Join(ws, "nested")
			os.WriteFile(filepath.Join(nested, "tracked.txt"), []byte("one\n"), 0o644)
			inGit(t, nested, "add", "tracked.txt")
			inGit(t, nested, "commit", "-q", "-m", "nested")
			appendFile(t, filepath.Join(nested, ".git", "config"), fmt.Sprintf("[filter \"evil\"]\n\tclean = %s\n\trequired = true\n", evil("filter")))
			os.WriteFile(filepath.Join(nested, ".gitattributes"), []byte("* filter=evil\n"), 0o644)
			os.WriteFile(filepath.Join(nested, "tracked.txt"), []byte("two\n"), 0o644)

			inGit(t, ws, "init", "-q", "--separate-git-dir", filepath.Join(ws, ".linked-git"), "linked")
			linked := filepath.Join(ws, "linked")
			os.WriteFile(filepath.Join(linked, "f.txt"), []byte("f\n"), 0o644)
			inGit(t, linked, "add", "f.txt")
			inGit(t, linked, "commit", "-q", "-m", "linked")
			appendFile(t, filepath.Join(ws, ".linked-git", "config"), fmt.Sprintf("[core]\n\tfsmonitor = %s\n", evil("fsmonitor")))
			os.WriteFile(filepath.Join(linked, "f.txt"), []byte("g\n"), 0o644)
			inGit(t, ws, "add", "nested", "linked")
			inGit(t, ws, "commit", "-q", "-m", "gitlinks")

			switch link {
			case "objects/ab":
				// The other Session's commit object, by a link in place of
				// its folder (or of the object, if the folder is ours too).
				dir := theirs[:2]
				if _, err := os.Lstat(filepath.Join(dotGit, "objects", dir)); err != nil {
					os.Symlink(filepath.Join(other, ".git", "objects", dir), filepath.Join(dotGit, "objects", dir))
				} else {
					os.Symlink(filepath.Join(other, ".git", "objects", dir, theirs[2:]), filepath.Join(dotGit, "objects", dir, theirs[2:]))
				}
			case "objects/pack":
				inGit(t, other, "repack", "-a", "-d", "-q")
				os.RemoveAll(filepath.Join(dotGit, "objects", "pack"))
				os.Symlink(filepath.Join(other, ".git", "objects", "pack"), filepath.Join(dotGit, "objects", "pack"))
			}
			os.WriteFile(filepath.Join(dotGit, "refs", "heads", "leak"), []byte(theirs+"\n"), 0o644)
			chownAll(t, ws, 1000)

			ch, err := workspaceChangesFrom(t, ws, base)
			if b, rerr := os.ReadFile(ran); rerr == nil {
				t.Errorf("the Workspace ran a command on the host: %s", b)
			}
			got, _ := json.Marshal(ch)
			if err != nil {
				got = append(got, err.Error()...)
			}
			if strings.Contains(string(got), "SECRET") || strings.Contains(string(got), "theirs") {
				t.Errorf("another Session's Workspace showed in this one's Changes: %s", got)
			}
			if strings.Contains(string(got), "-dirty") {
				t.Errorf("git looked into a nested repository (its gitlink shows -dirty): %s", got)
			}
		})
	}
}

// TestAOneLineFileOf64MiBCostsTheRunnerNoMoreThanTheCut: a line is never
// held whole. The Runner's process allocates no more than the answer it
// reads, whatever the Workspace holds.
func TestAOneLineFileOf64MiBCostsTheRunnerNoMoreThanTheCut(t *testing.T) {
	ws, base := clonedWorkspace(t)
	f, err := os.Create(filepath.Join(ws, "one-line.txt"))
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("x"), 1<<20)
	for range 64 {
		f.Write(line)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ch := changesOf(t, ws, base)
	runtime.ReadMemStats(&after)
	if ch.Cut == "" {
		t.Errorf("a 64 MiB file's diff was not cut: %+v", ch.Files)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*protocol.ChangesMax {
		t.Errorf("the Runner allocated %d MiB for the Changes, want at most %d MiB", alloc>>20, 3*protocol.ChangesMax>>20)
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(text)
}

// chownAll gives everything under dir to uid (and the same gid), links
// themselves and not what they name.
func chownAll(t *testing.T, dir string, uid int) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			os.Lchown(p, uid, uid)
		}
		return nil
	})
}
