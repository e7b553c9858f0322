package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// TestARefusalIsTakenOncePerPersonAndThreadADay: a person refused in a
// thread is refused there once until a day has passed; another thread,
// or another person, has a refusal of their own.
func TestARefusalIsTakenOncePerPersonAndThreadADay(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		now := time.Now()
		s.now = func() time.Time { return now }
		take := func(issue int, who int64) bool {
			t.Helper()
			fresh, err := s.Threads.TakeRefusal(ctx, "acme/app", issue, who)
			if err != nil {
				t.Fatal(err)
			}
			return fresh
		}
		if !take(1, 42) || take(1, 42) {
			t.Fatal("a person's first refusal in a thread was not taken, or their second was")
		}
		if !take(2, 42) || !take(1, 43) {
			t.Fatal("another thread's or another person's first refusal was not taken")
		}
		now = now.Add(23 * time.Hour)
		if take(1, 42) {
			t.Fatal("a refusal was taken again within the day")
		}
		now = now.Add(2 * time.Hour)
		if !take(1, 42) || take(1, 42) {
			t.Fatal("a day on, the person's refusal was not taken again once")
		}
	})
}

// TestTheThreadContextSwitchIsTheSessions: off for a new Session, on once
// set, and an unknown Session's is not found.
func TestTheThreadContextSwitchIsTheSessions(t *testing.T) {
	eachEngine(t, func(t *testing.T, open opener) {
		s, _ := open(t)
		ctx := context.Background()
		x, _ := devSession(t, s)
		if x.ThreadContext {
			t.Fatal("a new Session shows others' comments as context")
		}
		if err := s.Sessions.SetThreadContext(ctx, x.ID, true); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Sessions.SessionByID(ctx, x.ID); err != nil || !got.ThreadContext {
			t.Fatalf("the Session after the switch was set: %+v %v", got, err)
		}
		if err := s.Sessions.SetThreadContext(ctx, "00000000-0000-4000-8000-000000000000", true); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("an unknown Session's switch: %v, want not found", err)
		}
	})
}
