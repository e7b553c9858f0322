package runner

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
)

// noSandboxes is a backend with no Sandbox: enough for a Runner to
// start, connect and stop.
type noSandboxes struct{ sandbox.Backend }

func (noSandboxes) Name() string { return "none" }
func (noSandboxes) Host() sandbox.HostInfo {
	return sandbox.HostInfo{Relay: "127.0.0.1:0", CPUs: 1, MemoryMiB: 1024}
}
func (noSandboxes) List(context.Context) ([]sandbox.Status, error) { return nil, nil }

// testHub serves a Hub's Runner endpoint: it welcomes the Runner's hello
// and hands over the connection, and gives each stream the Runner dials
// back (/runner/stream/{id}) to stream.
func testHub(t *testing.T, stream func(r *http.Request, c *websocket.Conn)) (*httptest.Server, chan *protocol.Conn) {
	hubConn := make(chan *protocol.Conn, 1)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		if strings.HasPrefix(r.URL.Path, "/runner/stream/") {
			stream(r, c)
			return
		}
		conn := protocol.NewConn(c, slog.New(slog.DiscardHandler))
		conn.Handle(protocol.TypeHello, false, func(context.Context, json.RawMessage) (any, error) {
			return protocol.Welcome{Version: protocol.Version, RunnerID: "r1"}, nil
		})
		hubConn <- conn
		conn.Serve(r.Context())
	}))
	t.Cleanup(hub.Close)
	return hub, hubConn
}

// TestARunnerStoppedMidDownloadEndsAtOnceLeavingNoGoroutine: Run returns
// at once when its context is done, with no goroutine of the Runner's
// left, though a Workspace file it was sending to the Hub was never read
// there: it waits on no close handshake with a Hub that does not read.
func TestARunnerStoppedMidDownloadEndsAtOnceLeavingNoGoroutine(t *testing.T) {
	const id = "0c9f074e-a843-418d-ac33-25c5f87e7797"
	home := t.TempDir()
	ws := filepath.Join(home, "sessions", id, "workspace")
	os.MkdirAll(ws, 0o755)
	// Far more than the connection buffers hold: the send blocks. Sparse,
	// so it costs no write to the disk (a second a run, written).
	big := filepath.Join(ws, "big")
	if err := errors.Join(os.WriteFile(big, nil, 0o644), os.Truncate(big, 64<<20)); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kndl")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)

	streaming := make(chan struct{})
	hub, hubConn := testHub(t, func(r *http.Request, c *websocket.Conn) {
		close(streaming)
		// Never reads the file. A hijacked request's context outlives the
		// Runner's end of it, so the test's end ends it.
		select {
		case <-r.Context().Done():
		case <-t.Context().Done():
		}
		c.CloseNow()
	})
	r, err := New(Config{HubURL: hub.URL, Token: "kndlr_test", Home: home, Binary: bin}, noSandboxes{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	conn := <-hubConn
	testenv.Eventually(t, testenv.WaitShort, "the Runner connected", r.Connected)
	r.mu.Lock()
	r.sessions[id] = &session{id: id}
	r.mu.Unlock()
	if err := conn.Request(ctx, protocol.TypeSessionFile, protocol.SessionFile{SessionID: id, Path: "big", Stream: "s1"}, nil); err != nil {
		t.Fatalf("ask for the file: %v", err)
	}
	<-streaming

	cancel()
	stopped := time.Now()
	select {
	case <-ran:
	case <-time.After(closeWait + testenv.WaitShort):
		t.Fatal("Run did not return")
	}
	// A close handshake with a Hub that does not read takes 5 s at least.
	if took := time.Since(stopped); took > 3*time.Second {
		t.Errorf("Run returned %v after it was stopped, want at most 3s", took.Round(time.Millisecond))
	}
	testenv.NoLeftover(t, testenv.WaitShort, "kndl.dev/kndl/internal/runner")
}
