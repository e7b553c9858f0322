// Package session is the one owner of a Session's life on the Hub: its
// states and the transitions between them, each with all of its effects
// (mod tokens issued and revoked, live state, the history note, what
// watchers are sent), the prompt queue and its delivery, and the live
// stream of a Session's Events and changes. internal/hub imports it; its
// HTTP handlers and its Runner endpoint call it and change no state
// themselves.
package session

import (
	"fmt"
	"slices"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// The states a Session is in, as the store keeps them.
const (
	Starting = store.Starting // its Runner is making its Sandbox and starting Claude Code
	Active   = store.Active   // Claude Code runs and its Runner is connected
	Frozen   = store.Frozen   // its Runner is away; Claude Code may still run
	Asleep   = store.Asleep   // stopped, disks and Workspace kept
	Failed   = store.Failed   // its start failed; a prompt or a wake retries it
	Archived = store.Archived // its Sandbox removed; Workspace kept until the purge
)

// next lists, for each state, the states that may follow it.
var next = map[store.SessionState][]store.SessionState{
	Starting: {Active, Frozen, Asleep, Failed},
	Active:   {Frozen, Asleep, Failed},
	Frozen:   {Active, Asleep, Failed},
	Asleep:   {Starting, Failed, Archived},
	Failed:   {Starting, Archived},
	Archived: {Asleep},
}

// checkMove returns an ErrConflict naming both states when to may not
// follow from.
func checkMove(from, to store.SessionState) error {
	if slices.Contains(next[from], to) {
		return nil
	}
	return fmt.Errorf("a Session that is %s cannot become %s: %w", from, to, errdefs.ErrConflict)
}

// awake reports whether a Session in st has, or is getting, a running
// Claude Code.
func awake(st store.SessionState) bool { return st == Starting || st == Active || st == Frozen }
