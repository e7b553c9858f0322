package runner

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/confine"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/tied"
)

// A Session's changes, computed by git on the Runner, never by anything
// in the Sandbox, and never with the Runner's privileges: everything in
// the Workspace is the Sandbox's to write. The work runs as the confined
// task taskChanges (internal/confine): as no one, in namespaces of its
// own, seeing the Workspace alone, read-only, with no network, bounded in
// time and memory. So a filter a nested repository's config names, a
// link into another Session's objects, or a FIFO reaches nothing of the
// host's. Inside, git still reads none of the Workspace's config: it runs
// with a git directory of its own, made for the one diff (a config that
// sets nothing, copies of the Workspace's HEAD, refs, index and
// info/exclude, regular files only, and the Workspace's objects read where
// they are), submodules ignored and never recursed into. The host's
// system and global config stay off as for the clone (cloneEnv,
// safeGitConfig).

// baseFile, in the Session's directory beside its Workspace and out of
// the Sandbox's reach, records where the Workspace started: the commit
// and the branch cloned.
const baseFile = "base"

// emptyTree is git's empty tree: the base of a Repo cloned with no commit.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// diffWithin bounds git's work for one session.diff: the Hub waits 15 s
// for the reply and the stream (runners.StreamWait), so git past that
// works for nobody.
const diffWithin = 15 * time.Second

// commitsMax bounds the commits Changes lists, newest first.
const commitsMax = 200

// recordBase writes where the fresh clone in ws starts into base: its
// HEAD's commit (none for an empty Repo) and branch.
func recordBase(ctx context.Context, ws, base string) error {
	g := &workspaceGit{env: append(cloneEnv(os.TempDir()), "GIT_DIR="+filepath.Join(ws, ".git"), "GIT_WORK_TREE="+ws)}
	commit, err := g.output(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		commit = nil // an empty Repo
	}
	branch, _ := g.output(ctx, "symbolic-ref", "--short", "HEAD")
	return os.WriteFile(base, []byte(strings.TrimSpace(string(commit))+"\t"+strings.TrimSpace(string(branch))+"\n"), 0o600)
}

// readBase reads what recordBase wrote.
func readBase(base string) (commit, branch string, err error) {
	b, err := os.ReadFile(base)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", fmt.Errorf("this Workspace was cloned before its Runner recorded where it starts, so its changes can't be told: %w", errdefs.ErrNotFound)
	} else if err != nil {
		return "", "", err
	}
	commit, branch, _ = strings.Cut(strings.TrimSpace(string(b)), "\t")
	if commit == "" {
		commit = emptyTree
	}
	return commit, branch, nil
}

// workspaceGit runs git on a Workspace with a git directory of its own.
type workspaceGit struct {
	env []string
}

// openWorkspaceGit makes the git directory for one look at the Workspace
// ws; done removes it. A .git, its objects or their alternates that lead
// out of the Workspace are refused: git would read another place on the
// host as this Workspace's history.
func openWorkspaceGit(ws string) (g *workspaceGit, done func(), err error) {
	dotGit := filepath.Join(ws, ".git")
	for _, d := range []string{dotGit, filepath.Join(dotGit, "objects")} {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			return nil, nil, fmt.Errorf("the Workspace has no git repository of its own (%s is not a folder): %w", d[len(ws)+1:], errdefs.ErrConflict)
		}
	}
	if _, err := os.Lstat(filepath.Join(dotGit, "objects", "info", "alternates")); err == nil {
		return nil, nil, fmt.Errorf("the Workspace's git borrows objects from elsewhere (.git/objects/info/alternates), which the Runner does not read: %w", errdefs.ErrConflict)
	}
	dir, err := os.MkdirTemp("", "kndl-diff-")
	if err != nil {
		return nil, nil, err
	}
	done = func() { os.RemoveAll(dir) }
	if err := copyGitState(dotGit, dir); err != nil {
		done()
		return nil, nil, err
	}
	env := append(cloneEnv(filepath.Join(dir, "home")),
		// Objects git writes (add's) go to the git directory of its own;
		// the Workspace's are read where they are, which is read-only.
		"GIT_DIR="+dir, "GIT_WORK_TREE="+ws, "GIT_OBJECT_DIRECTORY="+filepath.Join(dir, "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(dotGit, "objects"),
		"GIT_INDEX_FILE="+filepath.Join(dir, "index"))
	return &workspaceGit{env: env}, done, nil
}

// copyGitState makes dir a git directory with the Workspace's HEAD, refs,
// index and info/exclude, and a config of its own.
func copyGitState(dotGit, dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"), 0o600); err != nil {
		return err
	}
	for _, name := range []string{"HEAD", "packed-refs", "index", filepath.Join("info", "exclude")} {
		if err := copyRegular(filepath.Join(dotGit, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	for _, d := range []string{"refs", "objects"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return err
		}
	}
	refs := filepath.Join(dotGit, "refs")
	return filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == refs || !d.Type().IsRegular() {
			return nil // a link or oddity is no ref of ours
		}
		return copyRegular(p, filepath.Join(dir, "refs", p[len(refs):]))
	})
}

// copyRegular copies src to dst if src is a regular file; anything else
// (missing, a link, a FIFO) is skipped.
func copyRegular(src, dst string) error {
	st, err := os.Lstat(src)
	if err != nil || !st.Mode().IsRegular() {
		return nil
	}
	data, err := readRegular(src)
	if err != nil {
		return nil // it changed meanwhile
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}

// readRegular reads src without following a link swapped in and without
// blocking on a FIFO.
func readRegular(src string) ([]byte, error) {
	f, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", src)
	}
	return io.ReadAll(f)
}

// cmd is git with args, the safe settings first.
func (g *workspaceGit) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "git", append(append(append([]string{}, safeGitConfig...), confinedGitConfig...), args...)...)
	cmd.Env = g.env
	return cmd
}

// outputMax bounds what one git run may print for output: a commit
// subject or a ref name is the Sandbox's to make as long as it likes.
const outputMax = 4 << 20

// output runs git and returns what it printed, or its message as the
// error; past outputMax it stops git and fails.
func (g *workspaceGit) output(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.cmd(ctx, args...)
	stderr := &cappedBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	out, over, err := runCapped(cmd, cancel, outputMax)
	if over {
		return nil, fmt.Errorf("git %s printed over %d MiB, more than the Changes read: %w", args[0], outputMax>>20, errdefs.ErrTooLarge)
	}
	if err != nil {
		return nil, fmt.Errorf("git %s: %s", args[0], firstLine(stderr.String(), err))
	}
	return out, nil
}

// runCapped runs cmd and returns what it printed on stdout, up to max
// bytes: past that, over is set and cmd is stopped by cancel (its
// context's). err is cmd's own failure.
func runCapped(cmd *exec.Cmd, cancel func(), max int) (out []byte, over bool, err error) {
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	if err := tied.Start(cmd); err != nil { // a confined task dies with the Runner
		return nil, false, err
	}
	out, rerr := io.ReadAll(io.LimitReader(pipe, int64(max)+1))
	if len(out) > max {
		cancel()
		cmd.Wait()
		return nil, true, nil
	}
	if err := cmd.Wait(); err != nil {
		return out, false, err
	}
	return out, false, rerr
}

// cappedBuffer keeps the first max bytes written to it and drops the rest.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func firstLine(s string, err error) string {
	if line, _, _ := strings.Cut(strings.TrimSpace(s), "\n"); line != "" {
		return line
	}
	return err.Error()
}

// diffFlags keep git's own diff whatever the Workspace says: no external
// diff and no textconv, besides no config that would name one; and a
// nested repository is a gitlink whose state git does not ask of it (that
// would run a git in it, which reads its own config).
var diffFlags = []string{"--no-ext-diff", "--no-textconv", "--no-color", "-M", "--ignore-submodules=all"}

// confinedGitConfig goes with safeGitConfig on every git of a confined
// task: submodules never recursed into, and pack windows small enough for
// the task's memory limit.
var confinedGitConfig = []string{"-c", "submodule.recurse=false", "-c", "diff.ignoreSubmodules=all",
	"-c", "core.packedGitLimit=256m", "-c", "core.packedGitWindowSize=32m"}

// workspaceChanges computes the Changes of the Workspace ws, which started
// at commit on branch. It reads what the Sandbox wrote, so the Runner runs
// it only as the confined task taskChanges.
func workspaceChanges(ctx context.Context, ws, commit, branch string) (protocol.Changes, error) {
	g, done, err := openWorkspaceGit(ws)
	if err != nil {
		return protocol.Changes{}, err
	}
	defer done()
	ch := protocol.Changes{Base: branch, BaseCommit: commit, Files: []protocol.ChangedFile{}, Commits: []protocol.Commit{}}
	if b, err := g.output(ctx, "symbolic-ref", "--quiet", "--short", "HEAD"); err == nil {
		ch.Branch = strings.TrimSpace(string(b))
	}
	// New files join the index copy as intent-to-add, so the diff against
	// the base shows them with the rest; the Workspace's index is untouched.
	if _, err := g.output(ctx, "add", "--intent-to-add", "--all", "--", "."); err != nil {
		return ch, err
	}
	if ch.Files, ch.Cut, err = g.diff(ctx, commit); err != nil {
		return ch, err
	}
	if ch.Commits, err = g.commits(ctx, commit); err != nil {
		return ch, err
	}
	return ch, nil
}

// diff lists the files that differ from commit, in git's order, each
// with its diff until protocol.DiffMax, and returns the note for the files
// left out. One git run says both: first each file's raw line (its status
// and paths, NUL-separated), an empty field, then the patch. A file the
// limit cuts in the middle is left out whole.
func (g *workspaceGit) diff(ctx context.Context, commit string) (files []protocol.ChangedFile, cut string, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.cmd(ctx, append(append([]string{"diff", "--patch-with-raw", "-z"}, diffFlags...), commit, "--")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	stderr := &cappedBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	rd := bufio.NewReader(out)
	files = rawFiles(rd)
	// No line is read past the cut: a file of one 64 MiB line is cut
	// after DiffMax bytes like any other.
	rd = bufio.NewReader(io.LimitReader(rd, protocol.DiffMax+1))
	i, total := -1, 0
	var cur strings.Builder
	for {
		line, rerr := rd.ReadString('\n')
		if strings.HasPrefix(line, "diff --git ") {
			if i >= 0 && i < len(files) {
				files[i].Diff = cur.String()
			}
			cur.Reset()
			i++
		}
		if total += len(line); total > protocol.DiffMax {
			cancel()
			cmd.Wait()
			return files, omitFrom(files, max(i, 0), commit), nil
		}
		cur.WriteString(line)
		if i >= 0 && i < len(files) {
			countLine(&files[i], line)
		}
		if rerr != nil {
			break
		}
	}
	if i >= 0 && i < len(files) {
		files[i].Diff = cur.String()
	}
	if err := cmd.Wait(); err != nil {
		return nil, "", fmt.Errorf("git diff: %s", firstLine(stderr.String(), err))
	}
	return files, "", nil
}

var statuses = map[byte]string{'A': "added", 'M': "modified", 'D': "deleted", 'R': "renamed", 'C': "copied", 'T': "changed"}

// rawFiles reads git diff -z's raw lines up to the empty field that ends
// them: ":oldmode newmode old new STATUS", then the path, or for a rename
// or copy the old path and the new.
func rawFiles(rd *bufio.Reader) []protocol.ChangedFile {
	files := []protocol.ChangedFile{}
	field := func() string {
		f, _ := readField(rd, 0, pathMax)
		return strings.TrimSuffix(f, "\x00")
	}
	for {
		raw := field()
		if !strings.HasPrefix(raw, ":") {
			return files // the empty field, or the end
		}
		st := raw[strings.LastIndexByte(raw, ' ')+1:]
		f := protocol.ChangedFile{Status: statuses[st[0]]}
		if f.Status == "" {
			f.Status = "changed"
		}
		if st[0] == 'R' || st[0] == 'C' {
			f.OldPath = field()
		}
		f.Path = field()
		files = append(files, f)
	}
}

// pathMax bounds one path git lists: more than a file system names.
const pathMax = 4096

// readField reads up to and with delim, keeping at most max bytes of it;
// the rest of a longer field is read and dropped.
func readField(rd *bufio.Reader, delim byte, max int) (string, error) {
	var b []byte
	for {
		chunk, err := rd.ReadSlice(delim)
		if room := max - len(b); room > 0 {
			b = append(b, chunk[:min(len(chunk), room)]...)
		}
		if err != bufio.ErrBufferFull {
			return string(b), err
		}
	}
}

// omitFrom leaves out the diffs of files[from:] and says so.
func omitFrom(files []protocol.ChangedFile, from int, commit string) string {
	for j := from; j < len(files); j++ {
		files[j] = protocol.ChangedFile{Path: files[j].Path, OldPath: files[j].OldPath, Status: files[j].Status, Omitted: true}
	}
	return fmt.Sprintf("The diff is over %d MiB, so it stops here: %d of %d files are listed without theirs. See them with git diff %s in the Session's terminal.",
		protocol.DiffMax>>20, len(files)-from, len(files), shortHash(commit))
}

// countLine counts a diff line in its file: an added or removed line, or
// the mark of a binary file.
func countLine(f *protocol.ChangedFile, line string) {
	switch {
	case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
	case strings.HasPrefix(line, "+"):
		f.Additions++
	case strings.HasPrefix(line, "-"):
		f.Deletions++
	case strings.HasPrefix(line, "Binary files "):
		f.Binary = true
	}
}

func shortHash(h string) string { return h[:min(len(h), 12)] }

// commits lists the commits on the Workspace's branches and HEAD that are
// not in commit, newest first, each marked pushed if a remote-tracking
// branch holds it.
func (g *workspaceGit) commits(ctx context.Context, commit string) ([]protocol.Commit, error) {
	not := []string{"--not", commit}
	if commit == emptyTree {
		not = nil
	}
	args := append([]string{"log", "--no-show-signature", "--format=%H%x00%s%x00%an%x00%aI", fmt.Sprintf("--max-count=%d", commitsMax), "HEAD", "--branches"}, not...)
	out, err := g.output(ctx, append(args, "--")...)
	if err != nil {
		if bytes.Contains([]byte(err.Error()), []byte("HEAD")) {
			return []protocol.Commit{}, nil // no commit yet
		}
		return nil, err
	}
	unpushed, err := g.output(ctx, append(append([]string{"rev-list", "HEAD", "--branches"}, not...), "--remotes", "--")...)
	if err != nil {
		return nil, err
	}
	left := map[string]bool{}
	for _, h := range strings.Fields(string(unpushed)) {
		left[h] = true
	}
	cs := []protocol.Commit{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\x00")
		if len(f) != 4 {
			continue
		}
		at, _ := time.Parse(time.RFC3339, f[3])
		cs = append(cs, protocol.Commit{Hash: f[0], Subject: f[1], Author: f[2], At: at, Pushed: !left[f[0]]})
	}
	return cs, nil
}

// taskChanges is the confined task that computes a Workspace's Changes:
// its arguments are the commit and branch it started from, its answer a
// changesAnswer in JSON on stdout.
const taskChanges = "changes"

// changesAnswer is what taskChanges prints: the Changes, or the error
// with its class.
type changesAnswer struct {
	Changes *protocol.Changes `json:"changes,omitempty"`
	Error   *protocol.Error   `json:"error,omitempty"`
}

// runChangesTask is taskChanges, inside its confinement.
func runChangesTask(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "kndl: the changes task takes a commit and a branch")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), diffWithin)
	defer cancel()
	var a changesAnswer
	if ch, err := workspaceChanges(ctx, confine.Dir, args[0], args[1]); err != nil {
		a.Error = protocol.ErrorOf(err)
	} else {
		a.Changes = &ch
	}
	if err := json.NewEncoder(os.Stdout).Encode(a); err != nil {
		return 1
	}
	return 0
}

// confinedChanges computes the Changes of the Workspace ws, which started
// where the file base says, as the confined task taskChanges, and reads at
// most protocol.ChangesMax of its answer.
func confinedChanges(ctx context.Context, ws, base string) (protocol.Changes, error) {
	commit, branch, err := readBase(base)
	if err != nil {
		return protocol.Changes{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, diffWithin)
	defer cancel()
	cmd, done, err := confine.Command(ctx, ws, confine.DefaultLimits, taskChanges, commit, branch)
	if err != nil {
		return protocol.Changes{}, err
	}
	defer done()
	stderr := &cappedBuffer{max: 64 << 10}
	cmd.Stderr = stderr
	out, over, werr := runCapped(cmd, cancel, protocol.ChangesMax)
	if over {
		return protocol.Changes{}, fmt.Errorf("the Changes are over %d MiB, more than the Runner reads: see them with git diff in the Session's terminal: %w", protocol.ChangesMax>>20, errdefs.ErrTooLarge)
	}
	var a changesAnswer
	if err := json.Unmarshal(out, &a); err != nil || (a.Changes == nil && a.Error == nil) {
		if ctx.Err() != nil {
			return protocol.Changes{}, fmt.Errorf("git took over %s on the Workspace: %w", diffWithin, errdefs.ErrUnavailable)
		}
		return protocol.Changes{}, fmt.Errorf("the confined git failed (%v): %s", werr, firstLine(stderr.String(), werr))
	}
	if a.Error != nil {
		return protocol.Changes{}, a.Error
	}
	return *a.Changes, nil
}

// sendChanges answers session.diff: the Changes of a Session's Workspace
// on this host, whether the Session runs, sleeps or is archived, sent as
// JSON over the stream the Hub named.
func (r *Runner) sendChanges(ctx context.Context, req protocol.SessionDiff) (protocol.SessionDiffInfo, error) {
	if !protocol.ValidSessionID(req.SessionID) {
		return protocol.SessionDiffInfo{}, fmt.Errorf("session id %q: %w", req.SessionID, errdefs.ErrInvalid)
	}
	dir := r.sessionDir(req.SessionID)
	ws := filepath.Join(dir, "workspace")
	if !cloned(ws) {
		return protocol.SessionDiffInfo{}, fmt.Errorf("this Runner has no Workspace of session %s (not cloned yet, or deleted once archived long enough): %w", req.SessionID, errdefs.ErrNotFound)
	}
	ch, err := confinedChanges(ctx, ws, filepath.Join(dir, baseFile))
	if err != nil {
		return protocol.SessionDiffInfo{}, err
	}
	data, err := json.Marshal(ch)
	if err != nil {
		return protocol.SessionDiffInfo{}, err
	}
	ws2, err := r.link.dialStream(ctx, req.Stream)
	if err != nil {
		return protocol.SessionDiffInfo{}, err
	}
	r.spawn(func() {
		nc := websocket.NetConn(r.life, ws2, websocket.MessageBinary)
		nc.Write(data)
		nc.Close()
	})
	return protocol.SessionDiffInfo{Size: int64(len(data))}, nil
}
