package notify

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"kndl.dev/kndl/internal/outbound"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
	"kndl.dev/kndl/internal/store/storetest"
	"kndl.dev/kndl/internal/testenv"
)

// TestMembersPostsToTheMembersNamedAloneOutsideTheSessionsPace: an
// egress_requested goes to the webhooks of the Members named, not the
// Session's Creator's, with the Session, kind and text, even with the
// Creator's pace used up; with no one named it goes to no one, the
// Creator neither.
func TestMembersPostsToTheMembersNamedAloneOutsideTheSessionsPace(t *testing.T) {
	ctx := context.Background()
	st := storetest.Open(t)
	creator, err := st.Members.DevUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	link, _ := st.Members.NewSetupLink(ctx)
	pusher, err := st.Members.ClaimSetupLink(ctx, link, store.GitHubIdentity{ID: 2, Login: "mia"})
	if err != nil {
		t.Fatal(err)
	}
	box, _ := seal.New(bytes.Repeat([]byte{7}, seal.KeyBytes))
	n := New(Options{Store: st.Notify, Sealer: box, Redactor: plain{}, Dialer: &outbound.Dialer{Allow: outbound.AllowLoopback},
		PublicURL: "https://hub.example", Retry: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(n.Close)
	creators, pushers := newReceiver(t, nil), newReceiver(t, nil)
	n.Add(ctx, creator.ID, creators.URL, FormatJSON)
	n.Add(ctx, pusher.ID, pushers.URL, FormatJSON)
	s := store.Session{ID: "s-1", CreatorID: creator.ID, Title: "add the client", RepoURL: "https://github.com/acme/app"}

	if err := n.Members(ctx, s, nil, EgressRequested, "to no one"); err != nil {
		t.Fatal(err)
	}
	for range perSession {
		n.Session(ctx, s, TurnEnded, "The Turn ended (done).")
	}
	text := "rita asks to allow registry.example.com"
	if err := n.Members(ctx, s, []string{pusher.ID}, EgressRequested, text); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, testenv.WaitShort, "the outbox empty", func() bool { _, waiting, _ := st.Notify.NextNotificationDue(ctx); return !waiting })
	evs, _ := pushers.got()
	if len(evs) != 1 || evs[0].Kind != EgressRequested || evs[0].Text != text || evs[0].Session.ID != s.ID ||
		evs[0].Session.Repo != s.RepoURL || evs[0].Session.URL != "https://hub.example/sessions/s-1" {
		t.Fatalf("the Member's webhook got %+v, want the one egress_requested on s-1", evs)
	}
	got, _ := creators.got()
	for _, ev := range got {
		if ev.Kind != TurnEnded {
			t.Errorf("the Creator's webhook got %s %q, want only its Turns' ends", ev.Kind, ev.Text)
		}
	}
	if len(got) != perSession {
		t.Errorf("the Creator's webhook got %d posts, want its %d Turn ends", len(got), perSession)
	}
}
