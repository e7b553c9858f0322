// Package masks keeps what a running Session must not let out: its
// redaction set, the values its text never shows (masked before any Event
// is stored or shown), and its Sandbox tokens, ended at GitHub once
// replaced or once the Session stops. The Hub (internal/hub) makes one of
// each and wires them; nothing else imports it.
package masks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/redact"
	"kndl.dev/kndl/internal/seal"
	"kndl.dev/kndl/internal/store"
)

// A Session's redaction set holds every value its text must never show:
// its Repo's Sensitive Variables and the Sensitive Shared variables the
// Repo links, its Creator's setup token, and the header secret values of
// the Installations its run started with. It lives while the Session
// runs, so a value replaced meanwhile stays in it (the Session started with
// it); values set meanwhile join it. It is made again at the next start.

// SetsStore is the parts of the Hub's store the Sets use: the Sessions
// that run, and the masks kept for each of them.
type SetsStore struct {
	Sessions interface {
		SessionByID(ctx context.Context, id string) (store.Session, error)
		List(ctx context.Context, f store.SessionFilter) ([]store.Session, error)
	}
	Variables interface {
		SessionMasks(ctx context.Context, sessionID string) ([][]byte, error)
		AddSessionMask(ctx context.Context, sessionID string, sealed []byte) error
		DropSessionMasks(ctx context.Context, sessionID string) error
	}
}

// Sets is every running Session's redaction set.
type Sets struct {
	store   SetsStore
	secrets *seal.Box
	values  func(ctx context.Context, s store.Session) ([]string, error)
	// allShapes masks every credential shape for watchers, not only the
	// Marked ones: HUB_REDACT_SHAPES=all.
	allShapes bool

	mu   sync.Mutex
	sets map[string]*runSet // by Session id, while it runs
}

// NewSets makes the sets of a Hub: values opens what a Session's text must
// never show, of its Repo (RepoID) and its Creator (CreatorID) as far as
// they are set, and the header secret values its run started with;
// allShapes is HUB_REDACT_SHAPES=all.
func NewSets(st SetsStore, secrets *seal.Box, values func(ctx context.Context, s store.Session) ([]string, error), allShapes bool) *Sets {
	return &Sets{store: st, secrets: secrets, values: values, allShapes: allShapes, sets: map[string]*runSet{}}
}

// runSet is a Session's redaction set while it runs, for the Session of
// repoID whose Creator is creatorID.
type runSet struct {
	set               *redact.Set
	repoID, creatorID string
}

// Of returns a Session's redaction set, making it from the store on first
// use.
func (m *Sets) Of(ctx context.Context, sessionID string) (*redact.Set, error) {
	m.mu.Lock()
	rs := m.sets[sessionID]
	m.mu.Unlock()
	if rs != nil {
		return rs.set, nil
	}
	rs, err := m.make(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	return m.keep(sessionID, rs), nil
}

// make makes a Session's redaction set from the store.
func (m *Sets) make(ctx context.Context, sessionID string) (*runSet, error) {
	s, err := m.store.Sessions.SessionByID(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	values, err := m.values(ctx, s)
	if err != nil {
		return nil, err
	}
	kept, err := m.store.Variables.SessionMasks(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	for _, sealed := range kept {
		plain, err := m.secrets.Open(sealed, maskSeal(sessionID))
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

// keep keeps rs as the Session's redaction set, unless one was kept
// meanwhile, and returns the one kept.
func (m *Sets) keep(sessionID string, rs *runSet) *redact.Set {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kept := m.sets[sessionID]; kept != nil {
		return kept.set
	}
	m.sets[sessionID] = rs
	return rs.set
}

// Drop drops a Session's redaction set once it no longer runs, with the
// masks the store kept for it: the next start makes it afresh, without the
// values replaced meanwhile.
func (m *Sets) Drop(ctx context.Context, sessionID string) error {
	m.mu.Lock()
	delete(m.sets, sessionID)
	m.mu.Unlock()
	return m.store.Variables.DropSessionMasks(ctx, sessionID)
}

// Keep adds value to a running Session's set, and keeps it in the store,
// sealed, so a restarted Hub goes on masking it: a Sandbox token the
// Session was given.
func (m *Sets) Keep(ctx context.Context, sessionID, value string) error {
	set, err := m.Of(ctx, sessionID)
	if err != nil {
		return err
	}
	if err := m.store.Variables.AddSessionMask(ctx, sessionID, m.secrets.Seal([]byte(value), maskSeal(sessionID))); err != nil {
		return err
	}
	return set.Add(value)
}

// maskSeal binds a kept mask to its Session.
func maskSeal(sessionID string) string { return "session-mask:" + sessionID }

// KeepMasking makes the running Sessions of repos (a Repo's id to true) go
// on masking a value that was just replaced, across a Hub restart too:
// they started with it. Only the sealed form is stored.
func (m *Sets) KeepMasking(ctx context.Context, value string, repos map[string]bool) error {
	ss, err := m.store.Sessions.List(ctx, store.SessionFilter{States: []store.SessionState{store.Starting, store.Active, store.Frozen}})
	if err != nil {
		return err
	}
	for _, s := range ss {
		if repos[s.RepoID] {
			if err := m.store.Variables.AddSessionMask(ctx, s.ID, m.secrets.Seal([]byte(value), maskSeal(s.ID))); err != nil {
				return err
			}
		}
	}
	return nil
}

// MaskNew adds a new value to the redaction sets of the running Sessions
// that which selects, by their Repo's id and their Creator's. Nothing is
// removed while a Session runs.
func (m *Sets) MaskNew(value string, which func(repoID, creatorID string) bool) {
	m.mu.Lock()
	var sets []*redact.Set
	for _, rs := range m.sets {
		if which(rs.repoID, rs.creatorID) {
			sets = append(sets, rs.set)
		}
	}
	m.mu.Unlock()
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
func (m *Sets) RedactEvents(ctx context.Context, sessionID string, evs []protocol.Event) error {
	mask, err := m.WatcherMask(ctx, sessionID)
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
		// A refused host is offered to Allow as it is: one that carries
		// a masked value (a Sandbox can look up SECRET.example.com) goes.
		for _, f := range []*string{&e.Blocked, &e.Requested} {
			if *f != "" && redact.Scrub(mask(*f)) != *f {
				*f = ""
			}
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

// WatcherMask returns how a Session's text is masked for everyone who may
// watch it: by value with its redaction set, then by shape with the Marked
// rules, or every rule if the Hub is told to (HUB_REDACT_SHAPES=all).
func (m *Sets) WatcherMask(ctx context.Context, sessionID string) (func(string) string, error) {
	set, err := m.Of(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	shapes := redact.ScrubMarked
	if m.allShapes {
		shapes = redact.Scrub
	}
	return func(text string) string { return shapes(set.Redact(text)) }, nil
}

// MaskTitle masks what a Session's title must not show, before the title
// is stored: the values its Sessions would mask (its Repo's Sensitive
// Variables, its Creator's token) and every credential shape. A title is
// the start of a person's prompt, where they may have pasted one.
func (m *Sets) MaskTitle(ctx context.Context, repoID, creatorID, title string) (string, error) {
	values, err := m.values(ctx, store.Session{RepoID: repoID, CreatorID: creatorID})
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
func (m *Sets) RedactText(ctx context.Context, sessionID, text string) string {
	if set, err := m.Of(ctx, sessionID); err == nil {
		text = set.Redact(text)
	}
	return redact.Scrub(text)
}

// RepoText masks a Repo's Sensitive values and every credential shape in
// a text the Hub keeps about the Repo, such as a Test build's log.
func (m *Sets) RepoText(ctx context.Context, repoID, text string) string {
	set := &redact.Set{}
	if values, err := m.values(ctx, store.Session{RepoID: repoID}); err == nil {
		set.Add(values...)
	}
	return redact.Scrub(set.Redact(text))
}

// Running lists the Sessions that have a set kept.
func (m *Sets) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.sets))
}

// Add adds values to a Session's set if one is kept; a set made later
// reads them from the store.
func (m *Sets) Add(sessionID string, values ...string) error {
	m.mu.Lock()
	rs := m.sets[sessionID]
	m.mu.Unlock()
	if rs == nil {
		return nil
	}
	return rs.set.Add(values...)
}
