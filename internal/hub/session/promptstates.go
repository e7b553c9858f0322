package session

import (
	"context"
	"fmt"
	"slices"

	"kndl.dev/kndl/internal/errdefs"
	"kndl.dev/kndl/internal/store"
)

// A prompt's state in the store: where it is on its way to Claude. The
// Owner moves it only through setPrompt, which checks this table; the
// store then moves it only from the state the caller saw
// (store.SetPromptState). TakePrompt is the one other mover: it takes the
// oldest queued prompt to delivering while none is, in one transaction.

// promptNext lists, for each prompt state, the states that may follow it.
var promptNext = map[store.PromptState][]store.PromptState{
	// Taken by dispatch (TakePrompt); cancelled by a person.
	store.Queued: {store.Delivering, store.Cancelled},
	// Claude Code took it; or back at the head of the queue (not taken
	// in time, the Runner gone, a sleep).
	store.Delivering: {store.Delivered, store.Queued},
	// A sleep before the transcript wrote it down: a wake's conversation
	// lacks it.
	store.Delivered: {store.Queued},
	store.Cancelled: nil,
}

// checkPromptMove returns an ErrConflict naming both states when to may
// not follow from.
func checkPromptMove(from, to store.PromptState) error {
	if slices.Contains(promptNext[from], to) {
		return nil
	}
	return fmt.Errorf("a prompt that is %s cannot become %s: %w", from, to, errdefs.ErrConflict)
}

// setPrompt moves prompt id from one state to another along the table,
// and in the store only if it is still in from (ErrConflict otherwise).
func setPrompt(ctx context.Context, st *store.Prompts, id string, from, to store.PromptState) error {
	if err := checkPromptMove(from, to); err != nil {
		return fmt.Errorf("prompt %s: %w", id, err)
	}
	return st.SetPromptState(ctx, id, from, to)
}
