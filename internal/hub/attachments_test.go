package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/api"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/testenv"
)

// attachSession makes a Session of the dev user's on a Repo with a
// Sensitive Variable, and returns it with the value.
func attachSession(t *testing.T, f *fixture) (store.Session, string) {
	t.Helper()
	ctx := context.Background()
	dev, _ := f.store.Members.DevUser(ctx)
	f.hub.StoreClaudeToken(ctx, dev.ID, setupToken)
	_, body := f.call(t, http.MethodPost, "/api/repos", `{"url":"/srv/app"}`)
	var repo api.Repo
	json.Unmarshal([]byte(body), &repo)
	const secret = "attached-secret-value-42"
	if code, body := f.call(t, http.MethodPut, "/api/repos/"+repo.ID+"/variables/TOKEN", `{"value":"`+secret+`","sensitive":true}`); code != http.StatusOK {
		t.Fatalf("set a variable: %d %s", code, body)
	}
	s, err := f.store.Sessions.CreateSession(ctx, store.Session{RepoID: repo.ID, CreatorID: dev.ID, RunnerID: f.runner.ID, Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	return s, secret
}

// upload posts a file's bytes as an Attachment named name; a negative
// length sends it chunked, its length unsaid.
func (f *fixture) upload(t *testing.T, session, name string, data []byte, length int64) (int, api.Attachment, string) {
	t.Helper()
	var body io.Reader = bytes.NewReader(data)
	if length < 0 {
		body = io.MultiReader(body) // hides the length
	}
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/api/sessions/"+session+"/attachments?name="+url.QueryEscape(name), body)
	if length >= 0 {
		req.ContentLength = length
	}
	resp, b := f.send(t, req)
	var a api.Attachment
	json.Unmarshal(b, &a)
	return resp.StatusCode, a, string(b)
}

func (f *fixture) download(t *testing.T, session, id string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/sessions/"+session+"/attachments/"+id, nil)
	return f.send(t, req)
}

// TestAttachmentsDownloadAsAttachmentsUnderSafeNames: whatever a file holds
// (here a page with a script), it downloads as bytes to save, under a name
// safe in a header, and never as a document on the Hub's origin; in the
// Sandbox its name has no separators or controls, and it is shown with
// the name it came with.
func TestAttachmentsDownloadAsAttachmentsUnderSafeNames(t *testing.T) {
	f := newFixture(t)
	s, _ := attachSession(t, f)
	page := []byte("<html><script>alert(document.cookie)</script></html>")
	const name = "../..\\evil\"\x01 page.html"
	code, a, body := f.upload(t, s.ID, name, page, int64(len(page)))
	if code != http.StatusCreated {
		t.Fatalf("upload: %d %s", code, body)
	}
	if a.Name != `evil" page.html` || a.File != "evil__page.html" || a.Type != "text/html" || a.Size != int64(len(page)) {
		t.Fatalf("stored %+v; want it shown as evil\" page.html, evil__page.html in the Sandbox", a)
	}
	resp, got := f.download(t, s.ID, a.ID)
	want := map[string]string{
		"Content-Type":            "application/octet-stream",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "default-src 'none'; sandbox",
	}
	for k, v := range want {
		if resp.Header.Get(k) != v {
			t.Errorf("%s: %q, want %q", k, resp.Header.Get(k), v)
		}
	}
	disp, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition"))
	if err != nil || disp != "attachment" || params["filename"] != "evil_ page.html" {
		t.Errorf("Content-Disposition %q: %q %v %v, want an attachment named evil_ page.html", resp.Header.Get("Content-Disposition"), disp, params, err)
	}
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, page) {
		t.Fatalf("download: %d %q", resp.StatusCode, got)
	}
	if resp, _ := f.download(t, s.ID, "nope"); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("no such attachment: %d, want 404", resp.StatusCode)
	}
	if code, _, _ := f.upload(t, s.ID, "/", page, int64(len(page))); code != http.StatusBadRequest {
		t.Fatalf("an upload with no name: %d, want 400", code)
	}
	code, list := f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/attachments", "")
	var as []api.Attachment
	if json.Unmarshal([]byte(list), &as); code != http.StatusOK || len(as) != 1 || as[0].ID != a.ID {
		t.Fatalf("list: %d %s", code, list)
	}
}

func TestSafeFileName(t *testing.T) {
	long := strings.Repeat("é", 80) + ".png"
	tests := []struct{ in, want string }{
		{"shot.png", "shot.png"},
		{"../../etc/passwd", "passwd"},
		{`C:\Users\me\notes.txt`, "notes.txt"},
		{"my file (1).png", "my_file__1_.png"},
		{"a\x00b\nc\x7f.txt", "a_b_c_.txt"},
		{"naïve résumé.pdf", "naïve_résumé.pdf"},
		{"..", "file.."},
		{"", "file"},
		{"@x;rm -rf", "_x_rm_-rf"},
		{long, strings.Repeat("é", 48) + ".png"},
	}
	for _, tt := range tests {
		if got := protocol.SafeFileName(tt.in); got != tt.want {
			t.Errorf("SafeFileName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestAttachmentsPastTheirLimitsAreRefusedAndKeepNothing: a file over
// HUB_ATTACHMENT_MAX, said in advance or not, and one that would take the
// Session past HUB_SESSION_ATTACHMENTS_MAX get 413 naming the limit and
// its variable, and nothing of them is kept.
func TestAttachmentsPastTheirLimitsAreRefusedAndKeepNothing(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.AttachmentMax, c.SessionAttachmentsMax = 1000, 2500 })
	s, _ := attachSession(t, f)
	tests := []struct {
		name   string
		size   int
		length int64
		want   int
		says   string
	}{
		{"over the file limit, said", 1001, 1001, http.StatusRequestEntityTooLarge, "over 1000 bytes, the limit for one attachment (HUB_ATTACHMENT_MAX"},
		{"over the file limit, unsaid", 1001, -1, http.StatusRequestEntityTooLarge, "HUB_ATTACHMENT_MAX"},
		{"at the file limit", 1000, 1000, http.StatusCreated, ""},
		{"again", 1000, -1, http.StatusCreated, ""},
		{"past the Session's total", 501, 501, http.StatusRequestEntityTooLarge, "past 2500 bytes, their limit (HUB_SESSION_ATTACHMENTS_MAX"},
		{"up to the Session's total", 500, 500, http.StatusCreated, ""},
	}
	for _, tt := range tests {
		code, _, body := f.upload(t, s.ID, "f.bin", bytes.Repeat([]byte{0}, tt.size), tt.length)
		if code != tt.want || !strings.Contains(body, tt.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tt.name, code, body, tt.want, tt.says)
		}
	}
	as, _ := f.store.Prompts.Attachments(context.Background(), s.ID)
	var total int64
	for _, a := range as {
		total += a.Size
	}
	if len(as) != 3 || total != 2500 {
		t.Fatalf("kept %d attachments of %d bytes, want the 3 allowed of 2500", len(as), total)
	}
	if f.hub.Config().AttachmentMax != 1000 || envDefaults(t).AttachmentMax != 20<<20 || envDefaults(t).SessionAttachmentsMax != 200<<20 {
		t.Fatal("the limits' defaults are not 20 MiB and 200 MiB")
	}
}

// envDefaults is a Config read from an empty environment, checked.
func envDefaults(t *testing.T) Config {
	c := FromEnv(func(string) string { return "" }, t.TempDir())
	c.SecretsKey = "x"
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTextAttachmentsAreStoredMaskedAndOthersAsTheyCame: a text file is
// stored through the Session's redaction set, so neither the download nor
// the copy Claude reads holds a Sensitive value or the Creator's token; a
// binary file is kept byte for byte.
func TestTextAttachmentsAreStoredMaskedAndOthersAsTheyCame(t *testing.T) {
	f := newFixture(t)
	s, secret := attachSession(t, f)
	text := []byte("DB=" + secret + "\ntoken: " + setupToken + "\n" + strings.Repeat("filler line\n", 10000) + "tail " + secret + "\n")
	code, a, body := f.upload(t, s.ID, ".env", text, -1)
	if code != http.StatusCreated || !a.Text || a.Type != "text/plain" {
		t.Fatalf("upload: %d %s", code, body)
	}
	_, got := f.download(t, s.ID, a.ID)
	if bytes.Contains(got, []byte(secret)) || bytes.Contains(got, []byte(setupToken)) || !bytes.Contains(got, []byte("DB="+strings.Repeat("*", len(secret)))) {
		t.Fatalf("the text attachment holds a Sensitive value or lost its shape:\n%.200s", got)
	}
	if len(got) != len(text) || int64(len(got)) != a.Size {
		t.Fatalf("masked text is %d bytes (recorded %d), want %d: one * per character", len(got), a.Size, len(text))
	}
	bin := append([]byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d}, []byte(secret)...)
	code, b, body := f.upload(t, s.ID, "shot.png", bin, int64(len(bin)))
	if code != http.StatusCreated || b.Text || b.Type != "image/png" {
		t.Fatalf("upload a png: %d %s", code, body)
	}
	if _, got := f.download(t, s.ID, b.ID); !bytes.Equal(got, bin) {
		t.Fatalf("a binary attachment changed: %q", got)
	}
}

// TestAPromptCarriesTheAttachmentsItNames: a prompt takes files uploaded to
// its Session, each once and under names of their own, and none on a
// command; the queue and the transcript's prompt show them; an archived
// Session takes no more and keeps those it has.
func TestAPromptCarriesTheAttachmentsItNames(t *testing.T) {
	f := newFixture(t)
	s, _ := attachSession(t, f)
	up := func(name string) string {
		code, a, body := f.upload(t, s.ID, name, []byte("hello"), 5)
		if code != http.StatusCreated {
			t.Fatalf("upload: %d %s", code, body)
		}
		return a.ID
	}
	a, b, same := up("a.txt"), up("b.txt"), up("dir/a.txt")
	prompt := func(body string) (int, string) {
		return f.call(t, http.MethodPost, "/api/sessions/"+s.ID+"/prompts", body)
	}
	tests := []struct {
		name, body string
		want       int
	}{
		{"no such attachment", `{"text":"look","attachments":["nope"]}`, http.StatusBadRequest},
		{"two named alike", `{"text":"look","attachments":["` + a + `","` + same + `"]}`, http.StatusBadRequest},
		{"on a command", `{"text":"/compact","is_command":true,"attachments":["` + a + `"]}`, http.StatusBadRequest},
		{"too many", `{"text":"look","attachments":[` + strings.TrimSuffix(strings.Repeat(`"`+a+`",`, api.MaxPromptAttachments+1), ",") + `]}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		if code, body := prompt(tt.body); code != tt.want {
			t.Errorf("%s: %d %s, want %d", tt.name, code, body, tt.want)
		}
	}
	code, body := prompt(`{"text":"look","attachments":["` + a + `","` + b + `"]}`)
	var p api.Prompt
	if json.Unmarshal([]byte(body), &p); code != http.StatusCreated || len(p.Attachments) != 2 || p.Attachments[0].PromptID != p.ID {
		t.Fatalf("prompt: %d %s", code, body)
	}
	if code, body := prompt(`{"text":"again","attachments":["` + a + `"]}`); code != http.StatusConflict {
		t.Fatalf("an attachment another prompt carries: %d %s, want 409", code, body)
	}
	if code, body := f.call(t, http.MethodPatch, "/api/sessions/"+s.ID+"/prompts/"+p.ID, `{"text":"x","attachments":["`+same+`"]}`); code != http.StatusBadRequest {
		t.Fatalf("an edit that changes attachments: %d %s, want 400", code, body)
	}
	_, view := f.call(t, http.MethodGet, "/api/sessions/"+s.ID, "")
	var sv api.SessionView
	if json.Unmarshal([]byte(view), &sv); len(sv.Queue) != 1 || len(sv.Queue[0].Attachments) != 2 {
		t.Fatalf("the queue: %s", view)
	}
	// The transcript's prompt, as Claude Code writes it, shows its files.
	ctx := context.Background()
	text := "look\n\n" + protocol.AttachedLine(p.ID, "a.txt") + "\n" + protocol.AttachedLine(p.ID, "b.txt")
	if err := f.hub.sessions.Record(ctx, s.ID, protocol.Event{Kind: protocol.EventPrompt, Text: text}); err != nil {
		t.Fatal(err)
	}
	evs, _ := f.store.Sessions.Events(ctx, s.ID, 0, 100)
	st := &sessionStream{rows: newSessionRows(f.hub), id: s.ID}
	if m, ok := st.event(context.Background(), evs[len(evs)-1]); !ok || len(m.Attachments) != 2 || m.Attachments[1].Name != "b.txt" {
		t.Fatalf("the prompt Event's message: %+v, want its two files", m)
	}
	f.store.Sessions.MoveSession(ctx, s.ID, store.Starting, store.Asleep, "", false)
	f.store.Sessions.MoveSession(ctx, s.ID, store.Asleep, store.Archived, "", false)
	if code, _, body := f.upload(t, s.ID, "late.txt", []byte("x"), 1); code != http.StatusConflict {
		t.Fatalf("attaching to an archived Session: %d %s, want 409", code, body)
	}
	if resp, got := f.download(t, s.ID, a); resp.StatusCode != http.StatusOK || string(got) != "hello" {
		t.Fatalf("an archived Session's attachment: %d %q, want it kept", resp.StatusCode, got)
	}
}

// TestAttachmentsGoOnlyToTheSessionsOwnRunnerWhileItIsAwake: a Runner gets
// an Attachment's bytes over a stream it dials back, with its size and
// SHA-256, only for a prompt of a Session of its own that is starting or
// awake.
func TestAttachmentsGoOnlyToTheSessionsOwnRunnerWhileItIsAwake(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, _ := attachSession(t, f)
	data := bytes.Repeat([]byte{0, 1, 2, 3}, 300<<10) // several stream messages
	_, named, _ := f.upload(t, s.ID, "big.bin", data, int64(len(data)))
	_, unnamed, _ := f.upload(t, s.ID, "other.bin", []byte{0}, 1)
	code, body := f.call(t, http.MethodPost, "/api/sessions/"+s.ID+"/prompts", `{"text":"look","attachments":["`+named.ID+`"]}`)
	var p api.Prompt
	if json.Unmarshal([]byte(body), &p); code != http.StatusCreated {
		t.Fatalf("prompt: %d %s", code, body)
	}
	dev, _ := f.store.Members.DevUser(ctx)
	_, otherToken, _ := f.store.Runners.CreateRunner(ctx, "r2", dev.ID)
	// The Session's Runner says it runs the Session, which the Hub takes
	// back; the other one is asked nothing.
	own, _ := helloWith(t, f, f.rtoken, []string{s.ID})
	other, _ := helloWith(t, f, otherToken, nil)
	fetch := func(c *protocol.Conn, token, id string) ([]byte, protocol.AttachmentStream, error) {
		var st protocol.AttachmentStream
		if err := c.Request(ctx, protocol.TypeSessionAttachment, protocol.AttachmentRef{SessionID: s.ID, AttachmentID: id}, &st); err != nil {
			return nil, st, err
		}
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/runner/stream/"+st.Stream,
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
		if err != nil {
			return nil, st, err
		}
		ws.SetReadLimit(-1)
		got, err := io.ReadAll(io.LimitReader(websocket.NetConn(ctx, ws, websocket.MessageBinary), st.Size))
		ws.CloseNow()
		return got, st, err
	}
	got, st, err := fetch(own, f.rtoken, named.ID)
	sum := sha256.Sum256(data)
	if err != nil || !bytes.Equal(got, data) || st.Size != int64(len(data)) || st.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("own Runner: %d bytes, %+v, %v; want the %d bytes with their SHA-256", len(got), st, err, len(data))
	}
	if _, _, err := fetch(other, otherToken, named.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another Runner: %v, want not found", err)
	}
	if _, _, err := fetch(own, f.rtoken, unnamed.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("a file no prompt carries: %v, want not found", err)
	}
	f.call(t, http.MethodDelete, "/api/sessions/"+s.ID+"/prompts/"+p.ID, "") // nothing to wake it for
	cur, _ := f.store.Sessions.SessionByID(ctx, s.ID)
	if err := f.store.Sessions.MoveSession(ctx, s.ID, cur.State, store.Asleep, "", false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fetch(own, f.rtoken, named.ID); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("an asleep Session: %v, want forbidden", err)
	}
	testenv.Eventually(t, testenv.WaitShort, "no stream left waiting", func() bool { return f.hub.runners.Waiting() == 0 })
}
