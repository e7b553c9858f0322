package triggers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// Progress is how a Session goes, as its reply in the thread says it.
type Progress struct {
	State store.SessionState
	// Activity is the Session Owner's: "turn" while a Turn runs,
	// "question" while Claude waits on a person, "" otherwise.
	Activity string
	Pulls    []string // its pull requests' links
	Set      string   // the attempt set it is an attempt of; "" for none
}

// DefaultEditGap is the least time between two edits of one Session's
// reply as it goes: the changes within it make one edit.
const DefaultEditGap = 3 * time.Second

// Changed tells the Receiver a Session changed (its state, what it is
// doing, its pull requests): its reply in the thread, if it has one, is
// edited within the edit gap, once for all the changes in it.
func (r *Receiver) Changed(sessionID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due[sessionID] {
		return
	}
	r.due[sessionID] = true
	time.AfterFunc(r.opts.EditGap, func() {
		r.mu.Lock()
		delete(r.due, sessionID)
		r.mu.Unlock()
		r.life.Go(func(ctx context.Context) {
			if err := r.editReply(ctx, sessionID); err != nil {
				r.log.Warn("edit a Session's reply in its thread", "session", sessionID, "err", err)
			}
		})
	})
}

// Tell puts text (a limit the Session reached, as its history says it) in
// the Hub's one reply in the thread the Session was started from, if it
// was, as the thread's latest. It never waits.
func (r *Receiver) Tell(sessionID, text string) {
	r.life.Go(func(ctx context.Context) {
		if err := r.note(ctx, sessionID, text); err != nil {
			r.log.Warn("could not tell a Session's thread", "session", sessionID, "err", err)
		}
	})
}

// editReply edits the Hub's reply in the Session's thread to say how it
// goes now, if that changed; a Session with no thread or no reply yet has
// nothing to edit.
func (r *Receiver) editReply(ctx context.Context, sessionID string) error {
	// One at a time: two edits of a reply at once could land in the
	// wrong order, and GitHub asks for content changes one at a time.
	r.editing.Lock()
	defer r.editing.Unlock()
	t, err := r.opts.Store.Threads.SessionThread(ctx, sessionID)
	if errors.Is(err, errdefs.ErrNotFound) || (err == nil && t.ReplyID == 0) || r.opts.GitHub == nil {
		return nil // not from a thread, or no reply there to edit
	}
	if err != nil {
		return err
	}
	body, p, err := r.replyOf(ctx, t)
	if err != nil {
		return err
	}
	r.mu.Lock()
	same := r.said[sessionID] == body
	r.mu.Unlock()
	if same {
		return nil
	}
	owner, name, _ := strings.Cut(t.Repo, "/")
	if err := r.opts.GitHub.EditComment(ctx, owner, name, t.ReplyID, body); err != nil {
		return err
	}
	if p.State == store.Archived {
		r.mu.Lock()
		delete(r.said, sessionID) // it goes no further
		r.mu.Unlock()
		return nil
	}
	r.remember(sessionID, body)
	return nil
}

// remember keeps the reply's body as last said, so an edit that would say
// the same is not made.
func (r *Receiver) remember(sessionID, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.said[sessionID] = body
}

// replyOf is the reply for the Session's thread as it goes now.
func (r *Receiver) replyOf(ctx context.Context, t store.Thread) (string, Progress, error) {
	s, err := r.opts.Store.Sessions.SessionByID(ctx, t.SessionID)
	if err != nil {
		return "", Progress{}, err
	}
	creator, err := r.opts.Store.Members.UserByID(ctx, s.CreatorID)
	if err != nil {
		return "", Progress{}, err
	}
	p, err := r.opts.Sessions.Progress(ctx, t.SessionID)
	if err != nil {
		return "", p, err
	}
	return r.reply(creator.GitHubLogin, t.SessionID, p, t.Note), p, nil
}

// reply is the Hub's one comment in a Session's thread: the Session's
// link, how it goes, its pull requests, and note, the thread's own latest
// (a comment taken as a prompt, a check sent back). It says nothing of
// what the Session says: the thread may be public.
func (r *Receiver) reply(login, sessionID string, p Progress, note string) string {
	link := strings.TrimSuffix(r.opts.PublicURL, "/") + "/sessions/" + sessionID
	var b strings.Builder
	fmt.Fprintf(&b, "@%s started a kndl Session from this, on their Claude account: %s\n\n**%s**\n", login, link, statusLine(p))
	if p.Set != "" {
		fmt.Fprintf(&b, "\nIt is one attempt of a set, ranked side by side: %s/attempts/%s\n", strings.TrimSuffix(r.opts.PublicURL, "/"), p.Set)
	}
	for _, pull := range p.Pulls {
		fmt.Fprintf(&b, "\nPull request: %s\n", pull)
	}
	b.WriteString("\nA later comment of theirs that mentions the App here, or on a pull request it opened, is a prompt to it.")
	if note != "" {
		b.WriteString(" " + note)
	}
	return b.String()
}

// statusLine says how the Session goes, in a line.
func statusLine(p Progress) string {
	switch p.State {
	case store.Starting:
		return "Starting."
	case store.Active:
		switch p.Activity {
		case "turn":
			return "Working."
		case "question":
			return "Waiting on a question: answer it on the Session's page."
		}
		return "Its Turn ended; awake for a prompt."
	case store.Frozen:
		return "Waiting for its Runner to come back."
	case store.Asleep:
		return "Its Turn ended; asleep. A prompt wakes it."
	case store.Failed:
		return "Failed: the Session's page says why."
	case store.Archived:
		return "Archived."
	}
	return string(p.State)
}
