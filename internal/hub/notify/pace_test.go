package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
)

// plain masks nothing.
type plain struct{}

func (plain) RedactText(_ context.Context, _, text string) string { return text }

// receiver is a webhook's end that keeps the bodies and when each came,
// and answers each only once hold is closed (nil: at once): an endpoint
// slow to answer, up to the post's timeout.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []Event
	at     []time.Time
}

func newReceiver(t *testing.T, hold <-chan struct{}) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev Event
		b, _ := io.ReadAll(req.Body)
		json.Unmarshal(b, &ev)
		r.mu.Lock()
		r.bodies, r.at = append(r.bodies, ev), append(r.at, time.Now())
		r.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
			}
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) got() ([]Event, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.bodies...), append([]time.Time(nil), r.at...)
}

// TestAStormOfTurnEndsDelaysNoOtherMembersNotification: a Session ending
// Turns by the hundred, whose Creator's endpoint answers slowly, gets its
// Creator at most the pace's few notifications a minute, the rest held
// and told as one that says how many; another Member's notification,
// queued after the storm, arrives at once all the same.
func TestAStormOfTurnEndsDelaysNoOtherMembersNotification(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	stormy, err := st.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	link, _ := st.Members.NewSetupLink(ctx)
	calm, err := st.Members.ClaimSetupLink(ctx, link, store.GitHubIdentity{ID: 2, Login: "mia"})
	if err != nil {
		t.Fatal(err)
	}
	box, err := seal.New(bytes.Repeat([]byte{7}, seal.KeyBytes))
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.NewClock(time.Now())
	n := New(Options{Store: st.Notify, Sealer: box, Redactor: plain{}, Dialer: &outbound.Dialer{Allow: outbound.AllowLoopback},
		PublicURL: "https://hub.example", Retry: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: c.Now})
	t.Cleanup(n.Close)
	hold := make(chan struct{})
	slow, quick := newReceiver(t, hold), newReceiver(t, nil)
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	})
	for _, w := range []struct {
		user string
		url  string
	}{{stormy.ID, slow.URL}, {calm.ID, quick.URL}} {
		if _, err := n.Add(ctx, w.user, w.url, FormatJSON); err != nil {
			t.Fatal(err)
		}
	}
	storm := store.Session{ID: "s-storm", CreatorID: stormy.ID, Title: "loops"}
	const turnEnds = 500
	for range turnEnds {
		n.Session(ctx, storm, TurnEnded, "The Turn ended (done).")
	}
	queued := time.Now()
	n.Session(ctx, store.Session{ID: "s-calm", CreatorID: calm.ID, Title: "asks"}, QuestionWaiting, "May I run make?")

	// The storm's endpoint holds its first post (as one answering at the
	// timeout would): the other Member's comes all the same.
	const bound = time.Second
	testenv.Eventually(t, testenv.WaitShort, "the other Member's notification, while the storm's endpoint holds a post", func() bool {
		evs, _ := quick.got()
		return len(evs) == 1
	})
	if _, at := quick.got(); at[0].Sub(queued) > bound {
		t.Errorf("the other Member's notification came %v after it was queued, want within %v", at[0].Sub(queued), bound)
	}
	testenv.Eventually(t, testenv.WaitShort, "the storm's first post", func() bool { evs, _ := slow.got(); return len(evs) > 0 })
	if evs, _ := slow.got(); len(evs) != 1 {
		t.Errorf("the storm's endpoint got %d posts while it held the first, want 1: one worker a Member", len(evs))
	}
	close(hold)

	// Within the minute, the storm's Creator gets the pace's few, and
	// nothing more waits to be posted.
	testenv.Eventually(t, testenv.WaitShort, "the storm's first notifications", func() bool { evs, _ := slow.got(); return len(evs) == perSession })
	testenv.Eventually(t, testenv.WaitShort, "the outbox empty", func() bool { _, waiting, _ := st.Notify.NextNotificationDue(ctx); return !waiting })
	if evs, _ := slow.got(); len(evs) != perSession {
		t.Fatalf("the storm's Creator got %d notifications within the minute, want at most %d", len(evs), perSession)
	}

	// The minute over, what it held comes as one, saying how many.
	c.Advance(paceWindow)
	n.poke() // as the loop's timer of the window's end would
	testenv.Eventually(t, testenv.WaitShort, "the storm's held notifications, as one", func() bool { evs, _ := slow.got(); return len(evs) == perSession+1 })
	evs, _ := slow.got()
	last := evs[perSession]
	held := turnEnds - perSession
	if last.Kind != TurnEnded || last.Coalesced != held-1 || !strings.Contains(last.Text, "497 turn_ended") {
		t.Errorf("the held ones came as %+v, want a turn_ended standing for %d more, its text counting %d", last, held-1, held)
	}
	testenv.Eventually(t, testenv.WaitShort, "the outbox empty again: nothing more of the storm waits", func() bool {
		_, waiting, _ := st.Notify.NextNotificationDue(ctx)
		return !waiting
	})
	if evs, _ := slow.got(); len(evs) != perSession+1 {
		t.Errorf("the storm's Creator got %d notifications, want %d: the minute's few and the one for the rest", len(evs), perSession+1)
	}
}
