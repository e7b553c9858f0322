package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/testenv"
)

// TestChangesSayTheyWaitForAGoneRunnerOrOneOfProtocol5: a Session's
// changes are on its Runner's disk, so with that Runner gone, or speaking
// protocol 5 (no session.diff), the Hub answers 503 saying what the
// changes wait for, and never asks another Runner.
func TestChangesSayTheyWaitForAGoneRunnerOrOneOfProtocol5(t *testing.T) {
	f := newFixture(t)
	s, _ := attachSession(t, f)
	code, body := f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/changes", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "is not connected; its changes show once it is back") {
		t.Errorf("its Runner gone: %d %s", code, body)
	}
	c := connectRunner(t, f, f.rtoken)
	if err := c.Request(context.Background(), protocol.TypeHello, protocol.Hello{MinVersion: 5, MaxVersion: 5, Models: claude.Models(), Name: "r1"}, nil); err != nil {
		t.Fatalf("a version 5 Runner's hello: %v", err)
	}
	code, body = f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/changes", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "speaks protocol 5") || !strings.Contains(body, "updates it to a kndl of protocol 6") {
		t.Errorf("its Runner of protocol 5: %d %s", code, body)
	}
}

// TestEveryoneAskingForChangesAtOnceSharesOneRunnerRequest: every
// watcher's tab asks at a Turn's end; the Runner runs git once for them
// all, and each gets the whole answer.
func TestEveryoneAskingForChangesAtOnceSharesOneRunnerRequest(t *testing.T) {
	f := newFixture(t)
	s, _ := attachSession(t, f)
	var asked atomic.Int32
	release := make(chan struct{})
	data, _ := json.Marshal(protocol.Changes{Base: "main", Files: []protocol.ChangedFile{{Path: "a.go", Status: "added", Diff: "+x\n"}}})
	hello(t, f, func(c *protocol.Conn) {
		c.Handle(protocol.TypeSessionDiff, false, func(ctx context.Context, body json.RawMessage) (any, error) {
			asked.Add(1)
			<-release
			var m protocol.SessionDiff
			json.Unmarshal(body, &m)
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/runner/stream/"+m.Stream,
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + f.rtoken}}})
			if err != nil {
				return nil, err
			}
			go func() {
				nc := websocket.NetConn(context.Background(), ws, websocket.MessageBinary)
				nc.Write(data)
				nc.Close()
			}()
			return protocol.SessionDiffInfo{Size: int64(len(data))}, nil
		})
	})
	const askers = 5
	answers := make(chan string, askers)
	for range askers {
		go func() {
			code, body := f.call(t, http.MethodGet, "/api/sessions/"+s.ID+"/changes", "")
			answers <- fmt.Sprint(code, " ", strings.TrimSpace(body))
		}()
	}
	testenv.Eventually(t, testenv.WaitShort, "every asker waiting on the one request", func() bool {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "singleflight.(*Group).Do(") == askers
	})
	close(release)
	for range askers {
		if got := <-answers; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"path":"a.go"`) {
			t.Errorf("an asker got %s", got)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the Runner was asked %d times, want once", n)
	}
}
