package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/sandbox"
	"kndl.dev/kndl/internal/testenv"
	"kndl.dev/kndl/internal/tmux"
)

// slowStops is a backend whose Sandboxes stop when the test lets them: a
// stop says so on stopping, then waits for release.
type slowStops struct {
	noSandboxes
	stopping chan string
	release  chan struct{}
}

func (b slowStops) Exec(context.Context, string, sandbox.Cmd) (sandbox.Process, error) {
	return nil, sandbox.ErrNotRunning // no Docker in it to stop first
}

func (b slowStops) Stop(ctx context.Context, id string) error {
	b.stopping <- id
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// hungUp is a tmux control client whose Claude Code exits at kill-session,
// as a hangup ends it.
func hungUp(t *testing.T) *tmux.Control {
	cmdR, cmdW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		io.WriteString(outW, "%begin 0 0 0\n%end 0 0 0\n")
		sc := bufio.NewScanner(cmdR)
		for n := 1; sc.Scan(); n++ {
			fmt.Fprintf(outW, "%%begin %d %d 0\n%%end %d %d 0\n", n, n, n, n)
			if strings.HasPrefix(sc.Text(), "kill-session") {
				outW.Close()
			}
		}
	}()
	ctl, err := tmux.NewControl(cmdW, outR, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmdW.Close(); outW.Close() })
	return ctl
}

// TestASessionWokenAsTheRunnerSaysHelloStartsOnlyOnceItsStopIsDone: the
// Runner's hello lists a Session the Hub holds asleep (it slept it while
// the Runner was away), so the welcome leaves it out and the Runner stops
// it; meanwhile the Hub wakes it for a prompt that waits, as RunnerBack
// does, its session.start sent as it answers the hello. The start waits
// for the stop and then goes on (here to the credentials, which this Hub
// refuses): it is neither refused as running nor run while the stop takes
// its Sandbox down. And the start begins the list of prompts taken afresh
// (once.go): the Claude Code it runs resumes a conversation without the
// prompt a sleep cut before the transcript wrote it down, which the Hub
// sends again, to be typed.
func TestASessionWokenAsTheRunnerSaysHelloStartsOnlyOnceItsStopIsDone(t *testing.T) {
	const id = "5b0f7c1e-2a4d-4e8f-9c3b-7d6e5f4a3b21"
	home := t.TempDir()
	bin := filepath.Join(t.TempDir(), "kndl")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	be := slowStops{stopping: make(chan string, 1), release: make(chan struct{})}

	started := make(chan error, 1)
	credentials := make(chan struct{}, 1)
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		conn := protocol.NewConn(ws, slog.New(slog.DiscardHandler))
		conn.Handle(protocol.TypeHello, false, func(ctx context.Context, body json.RawMessage) (any, error) {
			var h protocol.Hello
			json.Unmarshal(body, &h)
			if len(h.Sessions) != 1 || h.Sessions[0] != id {
				return nil, fmt.Errorf("hello listed %v, want %s", h.Sessions, id)
			}
			go func() {
				started <- conn.Request(ctx, protocol.TypeSessionStart, protocol.SessionStart{SessionID: id, RepoURL: "https://github.com/o/r"}, nil)
			}()
			return protocol.Welcome{Version: protocol.Version, RunnerID: "r1"}, nil
		})
		conn.Handle(protocol.TypeSessionCredentials, false, func(context.Context, json.RawMessage) (any, error) {
			credentials <- struct{}{}
			return nil, fmt.Errorf("no credentials in this test: %w", errdefs.ErrForbidden)
		})
		conn.Serve(r.Context())
	}))
	t.Cleanup(hub.Close)

	r, err := New(Config{HubURL: hub.URL, Token: "kndlr_test", Home: home, Binary: bin}, be)
	if err != nil {
		t.Fatal(err)
	}
	s := r.newSession(id)
	s.ctl = hungUp(t)
	taken := filepath.Join(s.dir, takenFile)
	if err := errors.Join(os.MkdirAll(s.dir, 0o700), os.WriteFile(taken, []byte(`["p1"]`), 0o600)); err != nil {
		t.Fatal(err)
	}
	r.sessions[id] = s
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	defer func() { cancel(); <-ran }()

	select {
	case got := <-be.stopping:
		if got != sandboxID(id) {
			t.Fatalf("stopped %s, want %s", got, sandboxID(id))
		}
	case err := <-started:
		t.Fatalf("the start was answered before the stop: %v", err)
	case <-time.After(testenv.WaitShort):
		t.Fatal("the Runner did not stop the Session the Hub left out")
	}
	// While the stop runs, the start goes nowhere.
	select {
	case err := <-started:
		t.Fatalf("the start was answered while the stop ran: %v", err)
	case <-credentials:
		t.Fatal("the start went on while the stop ran")
	case <-time.After(200 * time.Millisecond):
	}
	close(be.release)
	select {
	case err := <-started:
		if !errors.Is(err, errdefs.ErrForbidden) {
			t.Fatalf("the start answered %v, want it to go on to the credentials this Hub refuses", err)
		}
		if _, err := os.Stat(taken); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after the start, the list of prompts the last Claude Code took: %v, want it gone", err)
		}
	case <-time.After(testenv.WaitShort):
		t.Fatal("the start was not answered once the stop was done")
	}
}
