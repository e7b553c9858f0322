package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kndl.dev/kndl/internal/api"
)

// attach takes an upload as the Hub does: the bytes as the body, the name
// in ?name=, answered with the Attachment.
func (h *fakeHub) attach(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	a := api.Attachment{ID: fmt.Sprintf("att-%d", len(h.attached)+1), SessionID: r.PathValue("id"), Name: r.URL.Query().Get("name"),
		File: r.URL.Query().Get("name"), Type: http.DetectContentType(b), Size: int64(len(b)), CreatedAt: created}
	if r.ContentLength != int64(len(b)) {
		a.Name = "length unsaid"
	}
	if h.files == nil {
		h.files = map[string][]byte{}
	}
	h.attached, h.files[a.ID] = append(h.attached, a), b
	h.changes = append(h.changes, "POST "+r.URL.Path+"?name="+a.Name)
	h.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	h.reply(w, a)
}

// prompt queues a prompt, answering with the attachments it names.
func (h *fakeHub) prompt(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req api.PromptRequest
	json.Unmarshal(b, &req)
	p := api.Prompt{ID: "p1", SessionID: r.PathValue("id"), Text: req.Text, State: "queued"}
	h.mu.Lock()
	for _, id := range req.Attachments {
		for _, a := range h.attached {
			if a.ID == id {
				a.PromptID = p.ID
				p.Attachments = append(p.Attachments, a)
			}
		}
	}
	h.changes = append(h.changes, "POST "+r.URL.Path+" "+strings.TrimSpace(string(b)))
	h.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	h.reply(w, p)
}

func (h *fakeHub) attachments() []api.Attachment {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]api.Attachment{}, h.attached...)
}

func (h *fakeHub) file(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	b, ok := h.files[r.PathValue("attachment")]
	h.mu.Unlock()
	if !ok {
		h.notFound(w)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
}

// TestPromptAttachesEachFileThenNamesThem: each --attach file is uploaded
// under its base name with its length said, then the prompt names them by
// id; a file that can't be read sends nothing.
func TestPromptAttachesEachFileThenNamesThem(t *testing.T) {
	h := newFakeHub(t, session("s1", api.Active, "", "", false))
	dir := t.TempDir()
	png, notes := filepath.Join(dir, "shot.png"), filepath.Join(dir, "notes.txt")
	os.WriteFile(png, []byte("\x89PNG\r\n\x1a\n\x00\x00"), 0o644)
	os.WriteFile(notes, []byte("the notes"), 0o644)

	if _, errOut, code := kndl("prompt", "s1", "--attach", filepath.Join(dir, "missing.txt"), "look"); code == 0 || !strings.Contains(errOut, "missing.txt") {
		t.Fatalf("a missing file: exit %d %q", code, errOut)
	}
	if _, errOut, code := kndl("prompt", "s1", "--attach", dir, "look"); code == 0 || !strings.Contains(errOut, "not a regular file") {
		t.Fatalf("a directory: exit %d %q", code, errOut)
	}
	if got := h.taken(); len(got) != 0 {
		t.Fatalf("a refused prompt sent %q", got)
	}
	out, errOut, code := kndl("prompt", "s1", "--attach", png, "look at these", "--attach", notes)
	if code != 0 || !strings.Contains(out, "Queued prompt p1 with shot.png, notes.txt.") {
		t.Fatalf("kndl prompt --attach: exit %d %q %q", code, out, errOut)
	}
	want := []string{
		"POST /api/sessions/s1/attachments?name=shot.png",
		"POST /api/sessions/s1/attachments?name=notes.txt",
		`POST /api/sessions/s1/prompts {"text":"look at these","attachments":["att-1","att-2"]}`,
	}
	if got := h.taken(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAttachmentsListsAndDownloadsWithoutOverwriting: the list shows each
// file; get saves one under its name, refuses to write over a file, and
// writes to stdout with -o -.
func TestAttachmentsListsAndDownloadsWithoutOverwriting(t *testing.T) {
	newFakeHub(t, session("s1", api.Active, "", "", false))
	dir := t.TempDir()
	src := filepath.Join(dir, "notes.txt")
	os.WriteFile(src, []byte("the notes"), 0o644)
	if _, errOut, code := kndl("prompt", "s1", "--attach", src, "look"); code != 0 {
		t.Fatal(errOut)
	}
	out, _, code := kndl("attachments", "s1")
	if code != 0 || !strings.Contains(out, "att-1") || !strings.Contains(out, "notes.txt") || !strings.Contains(out, "9 B") {
		t.Fatalf("kndl attachments: %d %q", code, out)
	}
	t.Chdir(t.TempDir())
	if out, errOut, code := kndl("attachments", "s1", "get", "att-1"); code != 0 || !strings.Contains(out, "Saved notes.txt.") {
		t.Fatalf("get: %d %q %q", code, out, errOut)
	}
	if b, _ := os.ReadFile("notes.txt"); string(b) != "the notes" {
		t.Fatalf("saved %q", b)
	}
	if _, errOut, code := kndl("attachments", "s1", "get", "att-1"); code == 0 || !strings.Contains(errOut, "there already") {
		t.Fatalf("get over a file: %d %q", code, errOut)
	}
	if out, _, code := kndl("attachments", "s1", "get", "att-1", "-o", "-"); code != 0 || out != "the notes" {
		t.Fatalf("get -o -: %d %q", code, out)
	}
	if _, _, code := kndl("attachments", "s1", "get", "nope", "-o", "x"); code == 0 {
		t.Fatal("getting no such attachment succeeded")
	}
	if _, err := os.Stat("x"); err == nil {
		t.Fatal("a failed get left its file")
	}
}
