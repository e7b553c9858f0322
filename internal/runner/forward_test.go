package runner

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// TestWorkspaceDownloadsAreRegularFilesOnly: a Workspace file is sent
// whole over the stream the Hub asked for; a FIFO, a directory or a link
// (to a file or to a FIFO) is refused at once as no file, never opened
// for reading, so nothing in the Sandbox can hold a Runner goroutine.
func TestWorkspaceDownloadsAreRegularFilesOnly(t *testing.T) {
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	home := t.TempDir()
	ws := filepath.Join(home, "sessions", id, "workspace")
	if err := os.MkdirAll(filepath.Join(ws, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("hello"), 0o644)
	if err := syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("notes.txt", filepath.Join(ws, "link"))
	os.Symlink("fifo", filepath.Join(ws, "fifo-link"))

	got := make(chan []byte, 1)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(websocket.NetConn(context.Background(), c, websocket.MessageBinary))
		got <- b
	}))
	t.Cleanup(hub.Close)
	r := &Runner{cfg: Config{Home: home, HubURL: hub.URL}, link: link{hubURL: hub.URL}, sessions: map[string]*session{id: {id: id}}, life: context.Background()}

	send := func(path string) (protocol.SessionFileInfo, error) {
		t.Helper()
		type result struct {
			info protocol.SessionFileInfo
			err  error
		}
		done := make(chan result, 1)
		go func() {
			info, err := r.sendFile(context.Background(), protocol.SessionFile{SessionID: id, Path: path, Stream: "s1"})
			done <- result{info, err}
		}()
		select {
		case res := <-done:
			return res.info, res.err
		case <-time.After(testenv.WaitShort):
			t.Fatalf("sending %s still blocks after %s", path, testenv.WaitShort)
			return protocol.SessionFileInfo{}, nil
		}
	}
	for _, path := range []string{"fifo", "dir", "link", "fifo-link"} {
		if _, err := send(path); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", path, err)
		}
	}
	info, err := send("/workspace/notes.txt")
	if err != nil || info.Name != "notes.txt" || info.Size != 5 {
		t.Fatalf("a regular file: %+v %v", info, err)
	}
	select {
	case b := <-got:
		if string(b) != "hello" {
			t.Errorf("the stream carried %q, want the file", b)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("the file never came over the stream")
	}
}
