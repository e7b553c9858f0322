package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

const testPrompt = "0a0a0a0a-1111-4222-8333-444444444444"

// source is open for putAttachment: data with its SHA-256, counting calls.
func source(data string, calls *int) func() (io.ReadCloser, string, error) {
	return func() (io.ReadCloser, string, error) {
		*calls++
		sum := sha256.Sum256([]byte(data))
		return io.NopCloser(strings.NewReader(data)), hex.EncodeToString(sum[:]), nil
	}
}

// TestAttachmentsArePlacedInTheWorkspaceAndLeftOutOfGit: a prompt's files
// land where the prompt's lines say, in a folder git leaves out (a git add
// -A in the Sandbox picks up nothing of it), excluded once however often;
// a file placed whole is not fetched again.
func TestAttachmentsArePlacedInTheWorkspaceAndLeftOutOfGit(t *testing.T) {
	testenv.RequireCommand(t, "git")
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	root, err := os.OpenRoot(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	calls := 0
	for range 2 {
		dir, err := attachmentFolder(root, testPrompt)
		if err != nil {
			t.Fatal(err)
		}
		if err := putAttachment(root, dir+"/notes.txt", 5, source("hello", &calls)); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 1 {
		t.Fatalf("fetched %d times, want once: the second try finds it placed", calls)
	}
	rel := protocol.AttachmentsFolder + testPrompt + "/notes.txt"
	if got := protocol.AttachmentPath(testPrompt, "notes.txt"); got != workspaceDir+"/"+rel {
		t.Fatalf("AttachmentPath = %s, want it in the Workspace at %s", got, rel)
	}
	if b, err := os.ReadFile(filepath.Join(ws, rel)); err != nil || string(b) != "hello" {
		t.Fatalf("placed %q, %v", b, err)
	}
	exclude, _ := os.ReadFile(filepath.Join(ws, ".git", "info", "exclude"))
	if strings.Count(string(exclude), "\n"+protocol.AttachmentsFolder+"\n") != 1 {
		t.Fatalf(".git/info/exclude:\n%s\nwant %s in it once", exclude, protocol.AttachmentsFolder)
	}
	os.WriteFile(filepath.Join(ws, "work.go"), []byte("package x\n"), 0o644)
	add := exec.Command("git", "-C", ws, "add", "-A")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("git add -A: %v %s", err, out)
	}
	out, _ := exec.Command("git", "-C", ws, "diff", "--cached", "--name-only").Output()
	if strings.TrimSpace(string(out)) != "work.go" {
		t.Fatalf("git add -A staged %q, want only work.go", out)
	}
}

// TestAnAttachmentIsNeverPlacedThroughALink: a link (or a file) where the
// attachments' folders go is refused, inside the Workspace or out of it;
// a link with the file's own name is replaced, not written through; bytes
// that don't match their SHA-256 leave nothing; an unsafe file name is
// refused before anything is fetched.
func TestAnAttachmentIsNeverPlacedThroughALink(t *testing.T) {
	outside := t.TempDir()
	tests := []struct {
		name  string
		setup func(ws string)
	}{
		{".kndl links out of the Workspace", func(ws string) { os.Symlink(outside, filepath.Join(ws, ".kndl")) }},
		{".kndl/attachments links into src", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".kndl"), 0o755)
			os.Symlink("../src", filepath.Join(ws, ".kndl", "attachments"))
		}},
		{"the prompt's folder links out", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".kndl", "attachments"), 0o755)
			os.Symlink(outside, filepath.Join(ws, ".kndl", "attachments", testPrompt))
		}},
		{".kndl is a file", func(ws string) { os.WriteFile(filepath.Join(ws, ".kndl"), nil, 0o644) }},
		{".git/info/exclude links out", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".git", "info"), 0o755)
			os.Symlink(filepath.Join(outside, "exclude"), filepath.Join(ws, ".git", "info", "exclude"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := t.TempDir()
			os.MkdirAll(filepath.Join(ws, "src"), 0o755)
			tt.setup(ws)
			root, _ := os.OpenRoot(ws)
			defer root.Close()
			if _, err := attachmentFolder(root, testPrompt); err == nil {
				t.Fatal("the folder was made through a link")
			}
			for _, dir := range []string{outside, filepath.Join(ws, "src")} {
				if es, _ := os.ReadDir(dir); len(es) != 0 {
					t.Fatalf("%s holds %v", dir, es)
				}
			}
		})
	}

	ws := t.TempDir()
	root, _ := os.OpenRoot(ws)
	defer root.Close()
	dir, err := attachmentFolder(root, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, "target")
	os.WriteFile(target, []byte("keep"), 0o644)
	os.Symlink(target, filepath.Join(ws, dir, "shot.png"))
	calls := 0
	if err := putAttachment(root, dir+"/shot.png", 3, source("png", &calls)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("wrote through a link: the target holds %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(ws, dir, "shot.png")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("shot.png: %v %v, want a file in the link's place", fi, err)
	}
	bad := func() (io.ReadCloser, string, error) {
		return io.NopCloser(strings.NewReader("abc")), strings.Repeat("0", 64), nil
	}
	if err := putAttachment(root, dir+"/bad.bin", 3, bad); err == nil {
		t.Fatal("bytes that don't match their SHA-256 were placed")
	}
	if es, _ := os.ReadDir(filepath.Join(ws, dir)); len(es) != 1 {
		t.Fatalf("the folder holds %v, want shot.png alone", es)
	}

	home := t.TempDir()
	const session = "0b0b0b0b-1111-4222-8333-444444444444"
	os.MkdirAll(filepath.Join(home, "sessions", session, "workspace"), 0o755)
	r := &Runner{cfg: Config{Home: home}}
	s := r.newSession(session)
	for _, file := range []string{"../../escape", "a/b", ".."} {
		_, err := s.place(t.Context(), protocol.SessionDeliver{SessionID: session, PromptID: testPrompt, Text: "look",
			Attachments: []protocol.Attachment{{ID: "a1", File: file, Size: 1}}})
		if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("file %q: %v, want it refused as invalid", file, err)
		}
	}
}
