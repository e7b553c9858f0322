package hub

import (
	"context"
	"encoding/json"
	"fmt"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/store"
)

// A Session's redaction set holds every value its text must never show:
// its Repo's Sensitive Variables and the Sensitive Shared variables the
// Repo links, its Creator's setup token, and the header secret values of
// the Installations its run started with. It lives while the Session
// runs, so a value replaced meanwhile stays in it (the Session started with
// it); values set meanwhile join it. It is made again at the next start.

// runSet is a Session's redaction set while it runs, for the Session of
// repoID whose Creator is creatorID.
type runSet struct {
	set               *redact.Set
	repoID, creatorID string
}

// sessionSet returns a Session's redaction set, making it from the store
// on first use.
func (h *Hub) sessionSet(ctx context.Context, sessionID string) (*redact.Set, error) {
	h.mu.Lock()
	rs := h.sets[sessionID]
	h.mu.Unlock()
	if rs != nil {
		return rs.set, nil
	}
	rs, err := h.makeSet(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return h.keepSet(sessionID, rs), nil
}

// makeSet makes a Session's redaction set from the store.
func (h *Hub) makeSet(ctx context.Context, sessionID string) (*runSet, error) {
	s, err := h.store.SessionByID(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	values, err := h.sensitiveValues(ctx, s)
	if err != nil {
		return nil, err
	}
	kept, err := h.store.SessionMasks(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, sealed := range kept {
		plain, err := h.secrets.Open(sealed, maskSeal(sessionID))
		if err != nil {
			return nil, fmt.Errorf("a kept mask of session %s: %w", sessionID, err)
		}
		values = append(values, string(plain))
	}
	set := &redact.Set{}
	if err := set.Add(values...); err != nil {
		return nil, err
	}
	return &runSet{set: set, repoID: s.RepoID, creatorID: s.CreatorID}, nil
}

// keepSet keeps rs as the Session's redaction set, unless one was kept
// meanwhile, and returns the one kept.
func (h *Hub) keepSet(sessionID string, rs *runSet) *redact.Set {
	h.mu.Lock()
	defer h.mu.Unlock()
	if kept := h.sets[sessionID]; kept != nil {
		return kept.set
	}
	h.sets[sessionID] = rs
	return rs.set
}

// Forget drops a Session's redaction set once it no longer runs: the next
// start makes it afresh, without the values replaced meanwhile. Its
// Sandbox token, of no more use, is revoked.
func (h *Hub) Forget(sessionID string) {
	h.mu.Lock()
	delete(h.sets, sessionID)
	h.mu.Unlock()
	ctx := h.life.Context()
	h.tokens.stopped(ctx, sessionID)
	if err := h.store.DropSessionMasks(ctx, sessionID); err != nil {
		h.log.Error("drop a session's kept masks", "session", sessionID, "err", err)
	}
}

// maskSeal binds a kept mask to its Session.
func maskSeal(sessionID string) string { return "session-mask:" + sessionID }

// keepMasking makes the running Sessions of repos (a Repo's id to true) go
// on masking a value that was just replaced, across a Hub restart too:
// they started with it. Only the sealed form is stored.
func (h *Hub) keepMasking(ctx context.Context, value string, repos map[string]bool) error {
	ss, err := h.store.Sessions(ctx, store.SessionFilter{States: []store.SessionState{store.Starting, store.Active, store.Frozen}})
	if err != nil {
		return err
	}
	for _, s := range ss {
		if repos[s.RepoID] {
			if err := h.store.AddSessionMask(ctx, s.ID, h.secrets.Seal([]byte(value), maskSeal(s.ID))); err != nil {
				return err
			}
		}
	}
	return nil
}

// sensitiveValues opens the values a Session's text must never show.
func (h *Hub) sensitiveValues(ctx context.Context, s store.Session) ([]string, error) {
	vars, err := h.store.SessionVariables(ctx, s.RepoID)
	if err != nil {
		return nil, err
	}
	var values []string
	for _, v := range vars {
		if v.Sensitive {
			plain, err := h.openVariable(v)
			if err != nil {
				return nil, err
			}
			values = append(values, plain)
		}
	}
	if tok, err := h.claudeToken(ctx, s.CreatorID); err == nil {
		values = append(values, tok)
	}
	// The header secret values its run started with: a server may echo one.
	gw, err := h.gateway.Values(ctx, s.ID)
	return append(values, gw...), err
}

// maskNew adds a new value to the redaction sets of the running Sessions
// that which selects. Nothing is removed while a Session runs.
func (h *Hub) maskNew(value string, which func(rs *runSet) bool) {
	h.mu.Lock()
	var sets []*redact.Set
	for _, rs := range h.sets {
		if which(rs) {
			sets = append(sets, rs.set)
		}
	}
	h.mu.Unlock()
	for _, set := range sets {
		set.Add(value)
	}
}

// RedactEvents masks a Session's values in its Events: by value, in every
// text field of them; by shape, with the Marked rules (a credential with a
// prefix of its own: kndl's tokens, xoxb-, ghp_, …) in all of them, so a
// credential nobody registered is masked for watchers too, and with every
// rule (HUB_REDACT_SHAPES=all) if the Hub is told to; and with every rule
// in what the Hub and Runner say themselves (errors, start log, notes),
// where a credential nobody told the Hub about may turn up. It is the one
// place Session text is redacted before it is stored or shown.
func (h *Hub) RedactEvents(ctx context.Context, sessionID string, evs []protocol.Event) error {
	mask, err := h.watcherMask(ctx, sessionID)
	if err != nil {
		return err
	}
	for i := range evs {
		e := &evs[i]
		for _, f := range []*string{&e.Text, &e.Tool, &e.ToolID, &e.Agent, &e.Parent, &e.Reason} {
			*f = mask(*f)
		}
		switch e.Kind {
		case protocol.EventError, protocol.EventLog, protocol.EventNote:
			e.Text = redact.Scrub(e.Text)
		}
		if len(e.Input) > 0 {
			masked := mask(string(e.Input))
			if !json.Valid([]byte(masked)) {
				// A mask that broke the JSON: keep it as one string.
				b, _ := json.Marshal(masked)
				masked = string(b)
			}
			e.Input = json.RawMessage(masked)
		}
	}
	return nil
}

// watcherMask returns how a Session's text is masked for everyone who may
// watch it: by value with its redaction set, then by shape with the Marked
// rules, or every rule if the Hub is told to (HUB_REDACT_SHAPES=all).
func (h *Hub) watcherMask(ctx context.Context, sessionID string) (func(string) string, error) {
	set, err := h.sessionSet(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	shapes := redact.ScrubMarked
	if h.cfg.RedactAllShapes {
		shapes = redact.Scrub
	}
	return func(text string) string { return shapes(set.Redact(text)) }, nil
}

// maskTitle masks what a Session's title must not show, before the title
// is stored: the values its Sessions would mask (its Repo's Sensitive
// Variables, its Creator's token) and every credential shape. A title is
// the start of a person's prompt, where they may have pasted one.
func (h *Hub) maskTitle(ctx context.Context, repoID, creatorID, title string) (string, error) {
	values, err := h.sensitiveValues(ctx, store.Session{RepoID: repoID, CreatorID: creatorID})
	if err != nil {
		return "", err
	}
	set := &redact.Set{}
	if err := set.Add(values...); err != nil {
		return "", err
	}
	return redact.Scrub(set.Redact(title)), nil
}

// RedactText masks a text the Hub keeps about a Session, such as why its
// start failed.
func (h *Hub) RedactText(ctx context.Context, sessionID, text string) string {
	if set, err := h.sessionSet(ctx, sessionID); err == nil {
		text = set.Redact(text)
	}
	return redact.Scrub(text)
}
