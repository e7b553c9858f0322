package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// TestAWebhookDeliverysWorkIsReadBackOldestFirstAndClearedWhenDone: a
// delivery taken with work waits until it is done, the oldest first (two
// taken in one millisecond in the order taken); its id stays taken once
// done, and a delivery with no work is never pending.
func TestAWebhookDeliverysWorkIsReadBackOldestFirstAndClearedWhenDone(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, now := openStill(t, open)
		ctx := context.Background()
		take := func(id, event string, work []byte, fresh bool) {
			t.Helper()
			if got, err := s.Threads.TakeDelivery(ctx, id, event, id, work); err != nil || got != fresh {
				t.Fatalf("taking delivery %s: new %v, %v; want %v", id, got, err, fresh)
			}
		}
		next := func(want ...Delivery) {
			t.Helper()
			d, ok, err := s.Threads.NextDelivery(ctx)
			if err != nil || ok != (len(want) == 1) || (ok && !reflect.DeepEqual(d, want[0])) {
				t.Fatalf("the next delivery: %+v, %v, %v; want %+v", d, ok, err, want)
			}
		}
		next()
		take("d-b", "issue_comment", []byte(`{"b":1}`), true)
		take("d-a", "issues", []byte(`{"a":1}`), true)
		take("d-ping", "ping", nil, true)
		*now = now.Add(time.Second)
		take("d-c", "check_run", []byte(`{"c":1}`), true)
		take("d-b", "issue_comment", []byte(`{"b":2}`), false)

		next(Delivery{"d-b", "issue_comment", []byte(`{"b":1}`)})
		if err := s.Threads.DoneDelivery(ctx, "d-b"); err != nil {
			t.Fatal(err)
		}
		next(Delivery{"d-a", "issues", []byte(`{"a":1}`)})
		s.Threads.DoneDelivery(ctx, "d-a")
		next(Delivery{"d-c", "check_run", []byte(`{"c":1}`)})
		s.Threads.DoneDelivery(ctx, "d-c")
		next()
		take("d-b", "issue_comment", []byte(`{"b":3}`), false)
		next()
	})
}

// TestAWebhookDeliveryWhoseWorkIsPendingIsKeptPastAWeek: a week on, a
// delivery whose work is done is dropped, its id free again, and one
// whose work is not is kept, still pending and its id still taken.
func TestAWebhookDeliveryWhoseWorkIsPendingIsKeptPastAWeek(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, now := openStill(t, open)
		ctx := context.Background()
		for _, id := range []string{"d-pending", "d-done"} {
			if _, err := s.Threads.TakeDelivery(ctx, id, "issue_comment", id, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Threads.DoneDelivery(ctx, "d-done"); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(deliveryKeep + time.Hour)
		for _, tt := range []struct {
			id    string
			fresh bool
		}{{"d-new", true}, {"d-pending", false}, {"d-done", true}} {
			if fresh, err := s.Threads.TakeDelivery(ctx, tt.id, "ping", tt.id, nil); err != nil || fresh != tt.fresh {
				t.Errorf("a week on, taking %s: new %v, %v; want %v", tt.id, fresh, err, tt.fresh)
			}
		}
		if d, ok, err := s.Threads.NextDelivery(ctx); err != nil || !ok || d.ID != "d-pending" {
			t.Errorf("the next delivery a week on: %+v, %v, %v; want d-pending, its work not lost", d, ok, err)
		}
	})
}

// TestAWebhookBodyTakenWithinADayIsADuplicateUnderAnyId: a body whose
// digest was taken within the day is no new delivery under a fresh id
// (X-GitHub-Delivery is not signed), and records nothing; a day on, it
// is new again.
func TestAWebhookBodyTakenWithinADayIsADuplicateUnderAnyId(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, now := openStill(t, open)
		ctx := context.Background()
		for _, tt := range []struct {
			id, digest string
			after      time.Duration
			fresh      bool
		}{
			{"d-1", "sha-a", 0, true},
			{"d-2", "sha-a", time.Hour, false}, // a replay under a fresh id
			{"d-3", "sha-b", 0, true},          // another body
			{"d-2", "sha-c", 0, true},          // the replay's id was not taken
			{"d-4", "sha-a", digestKeep, true}, // over a day after the first
		} {
			*now = now.Add(tt.after)
			if fresh, err := s.Threads.TakeDelivery(ctx, tt.id, "issue_comment", tt.digest, []byte(`{}`)); err != nil || fresh != tt.fresh {
				t.Errorf("taking %s with body %s: new %v, %v; want %v", tt.id, tt.digest, fresh, err, tt.fresh)
			}
		}
	})
}

// TestASessionsThreadKeepsItsReplyAndNote: the thread a Session was
// started from is read back by the Session with the Hub's reply and its
// note, and by the issue, newest Session first; a Session a person
// started has none.
func TestASessionsThreadKeepsItsReplyAndNote(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, now := openStill(t, open)
		ctx := context.Background()
		xs := moreSessions(t, s, 3)
		must(t, s.Threads.AddThread(ctx, Thread{SessionID: xs[0].ID, Repo: "o/r", Issue: 4}))
		*now = now.Add(time.Second)
		must(t, s.Threads.AddThread(ctx, Thread{SessionID: xs[1].ID, Repo: "o/r", Issue: 4}))
		must(t, s.Threads.SetThreadReply(ctx, xs[0].ID, 1<<40))
		must(t, s.Threads.SetThreadNote(ctx, xs[0].ID, "a check sent back"))
		want := Thread{SessionID: xs[0].ID, Repo: "o/r", Issue: 4, ReplyID: 1 << 40, Note: "a check sent back"}
		if th, err := s.Threads.SessionThread(ctx, xs[0].ID); err != nil || th != want {
			t.Fatalf("the Session's thread: %+v, %v; want %+v", th, err, want)
		}
		ths, err := s.Threads.ThreadSessions(ctx, "o/r", 4)
		if err != nil || len(ths) != 2 || ths[0].SessionID != xs[1].ID || ths[1] != want {
			t.Fatalf("the issue's Sessions: %+v, %v; want the newest first, then %+v", ths, err, want)
		}
		if _, err := s.Threads.SessionThread(ctx, xs[2].ID); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("the thread of a Session a person started: %v, want ErrNotFound", err)
		}
	})
}
