package session

import (
	"context"

	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// The Owner's API: each method hands the call to the part that owns what
// it changes, where its doc says the whole of what it does.

// Create records a Session with its first prompt and starts it (life.Create).
func (o *Owner) Create(ctx context.Context, s store.Session, first store.Prompt) (store.Session, error) {
	return o.life.Create(ctx, s, first)
}

// Update records a Session's title, model and effort (life.Update).
func (o *Owner) Update(ctx context.Context, id, title, model, effort string) error {
	return o.life.Update(ctx, id, title, model, effort)
}

// Recover takes up, at a Hub's start, the Sessions the store says are
// awake (life.Recover).
func (o *Owner) Recover(ctx context.Context) error { return o.life.Recover(ctx) }

// Wake starts an Asleep or Failed Session again (life.Wake).
func (o *Owner) Wake(ctx context.Context, id, why string) error { return o.life.Wake(ctx, id, why) }

// Sleep stops an awake Session, keeping its disks (life.Sleep).
func (o *Owner) Sleep(ctx context.Context, id, why string) error { return o.life.Sleep(ctx, id, why) }

// Restart starts an Active Session's Claude Code again (life.Restart).
func (o *Owner) Restart(ctx context.Context, id, why string) error {
	return o.life.Restart(ctx, id, why)
}

// Archive removes a Session's Sandbox, keeping its Workspace for a while
// (life.Archive).
func (o *Owner) Archive(ctx context.Context, id, why string) error {
	return o.life.Archive(ctx, id, why)
}

// Restore makes an Archived Session Asleep again (life.Restore).
func (o *Owner) Restore(ctx context.Context, id, why string) error {
	return o.life.Restore(ctx, id, why)
}

// SleepAllOf puts a person's awake Sessions to sleep (life.SleepAllOf).
func (o *Owner) SleepAllOf(ctx context.Context, creatorID, why string) {
	o.life.SleepAllOf(ctx, creatorID, why)
}

// SetKeepAwake sets the Creator's Keep awake switch (life.SetKeepAwake).
func (o *Owner) SetKeepAwake(ctx context.Context, id string, on bool) error {
	return o.life.SetKeepAwake(ctx, id, on)
}

// Prompt queues a prompt, waking its Session if it sleeps (queue.Prompt).
func (o *Owner) Prompt(ctx context.Context, s store.Session, p store.Prompt) (store.Prompt, error) {
	return o.queue.Prompt(ctx, s, p)
}

// EditPrompt changes or cancels a queued prompt (queue.EditPrompt).
func (o *Owner) EditPrompt(ctx context.Context, sessionID, promptID, text string) error {
	return o.queue.EditPrompt(ctx, sessionID, promptID, text)
}

// MovePrompt moves a queued prompt in its queue (queue.MovePrompt).
func (o *Owner) MovePrompt(ctx context.Context, sessionID, promptID string, to int) error {
	return o.queue.MovePrompt(ctx, sessionID, promptID, to)
}

// Queue is a Session's waiting prompts as the API shows them (queue.Queue).
func (o *Owner) Queue(ctx context.Context, id string) ([]store.Prompt, error) {
	return o.queue.Queue(ctx, id)
}

// Typed is the Creator typing in the Session's terminal (queue.Typed).
func (o *Owner) Typed(id string) { o.queue.Typed(id) }

// Accepted is the mod's UserPromptSubmit (queue.Accepted).
func (o *Owner) Accepted(id string) { o.queue.Accepted(id) }

// TurnEnded is the end of a Turn (queue.TurnEnded).
func (o *Owner) TurnEnded(id string) { o.queue.TurnEnded(id) }

// RunnerBack answers a (re)connected Runner's hello (reports.RunnerBack).
func (o *Owner) RunnerBack(ctx context.Context, runnerID string, running []string) []protocol.ResumedSession {
	return o.reports.RunnerBack(ctx, runnerID, running)
}

// RunnerGone freezes a Runner's Active Sessions (reports.RunnerGone).
func (o *Owner) RunnerGone(ctx context.Context, runnerID string) { o.reports.RunnerGone(ctx, runnerID) }

// RunnerRemoved fails every Session on a Runner removed for good
// (reports.RunnerRemoved).
func (o *Owner) RunnerRemoved(ctx context.Context, runnerID, cause string) {
	o.reports.RunnerRemoved(ctx, runnerID, cause)
}

// RunnerNarrowed sleeps the Sessions on a Runner their Creators may no
// longer use (reports.RunnerNarrowed).
func (o *Owner) RunnerNarrowed(ctx context.Context, runnerID, why string) {
	o.reports.RunnerNarrowed(ctx, runnerID, why)
}

// Events records a batch of a Session's stream from its Runner
// (reports.Events).
func (o *Owner) Events(ctx context.Context, s store.Session, m protocol.SessionEvents) error {
	return o.reports.Events(ctx, s, m)
}

// Exited is a Runner's word that Claude Code exited on its own
// (reports.Exited).
func (o *Owner) Exited(ctx context.Context, id, detail string) error {
	return o.reports.Exited(ctx, id, detail)
}

// Subscribe returns a channel of a Session's live stream and a cancel
// func (stream.Subscribe).
func (o *Owner) Subscribe(id string) (<-chan Update, func()) { return o.stream.Subscribe(id) }

// Changed tells a Session's watchers that what they show of it changed
// outside the Owner (stream.Changed).
func (o *Owner) Changed(id string) { o.stream.Changed(id) }

// Record stores a Session's Events, redacted, and sends them to its
// watchers (stream.Record).
func (o *Owner) Record(ctx context.Context, id string, evs ...protocol.Event) error {
	return o.stream.Record(ctx, id, evs...)
}
