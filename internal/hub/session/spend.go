package session

import (
	"context"
	"fmt"
	"time"

	"kndl.dev/kndl/internal/claude"
	"kndl.dev/kndl/internal/protocol"
	"kndl.dev/kndl/internal/store"
)

// Spend caps, off by default: what one Session may spend in all
// (RepoLimits.MaxSessionSpend), and what a Repo's Sessions
// (RepoLimits.MaxSpend) and a Member's (Options.MemberMaxSpend) may spend
// in a day (UTC), as the price table estimates it from what the relay
// counted (the only count the Sandbox can't forge). Past one, the Runner's
// relay refuses the Session's model requests with an error Claude Code
// shows (session.capped), and the Session sleeps saying why; a wake or a
// prompt gets no further until the cap is raised or, for a day's, the day
// is over. A model the price table lacks costs nothing here.

// spendWayOn is what a person can do once a spend cap holds a Session.
const spendWayOn = "To go on, someone who may push to the Repo raises its caps (kndl repo edit --repo URL --max-spend USD --max-session-spend USD; 0 is no cap), the Hub's operator HUB_MEMBER_MAX_SPEND, or a day's cap starts again at midnight UTC; then wake the Session or send it a prompt."

// costOf is what usage costs by the price table, in US dollars.
func costOf(us []store.Usage) float64 {
	var usd float64
	for _, u := range us {
		c, _ := claude.EstimatedCost(u.Model, claude.Tokens{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite})
		usd += c
	}
	return usd
}

// spendReached says which spend cap a Session is past, "" for none. A cap
// that cannot be read holds it: the error.
func spendReached(ctx context.Context, st stores, memberMax float64, s store.Session) (string, error) {
	l, err := st.Repos.RepoLimits(ctx, s.RepoID)
	if err != nil {
		return "", fmt.Errorf("read the Repo's spend caps: %w", err)
	}
	if l.MaxSessionSpend > 0 {
		us, err := st.Usage.SessionUsage(ctx, s.ID)
		if err != nil {
			return "", err
		}
		if usd := costOf(us); usd >= l.MaxSessionSpend {
			return fmt.Sprintf("it spent $%.2f, its Repo's cap of $%.2f for one Session (--max-session-spend)", usd, l.MaxSessionSpend), nil
		}
	}
	member := memberMax
	if l.MaxSpend <= 0 && member <= 0 {
		return "", nil
	}
	rows, err := st.Usage.UsageByDay(ctx, time.Now().UTC(), "")
	if err != nil {
		return "", err
	}
	var repo, mine []store.Usage
	for _, r := range rows {
		if r.RepoID == s.RepoID {
			repo = append(repo, r.Usage)
		}
		if r.CreatorID == s.CreatorID {
			mine = append(mine, r.Usage)
		}
	}
	if usd := costOf(repo); l.MaxSpend > 0 && usd >= l.MaxSpend {
		return fmt.Sprintf("its Repo's Sessions spent $%.2f today, the Repo's cap of $%.2f a day (--max-spend)", usd, l.MaxSpend), nil
	}
	if usd := costOf(mine); member > 0 && usd >= member {
		return fmt.Sprintf("its Creator's Sessions spent $%.2f today, the Hub's cap of $%.2f a day for each Member (HUB_MEMBER_MAX_SPEND)", usd, member), nil
	}
	return "", nil
}

// countSpent counts what model replies of a Session spent, as its
// Runner's relay read it from the model API's answers: the one count of
// usage the Hub keeps and shows.
func (o *limits) countSpent(ctx context.Context, id string, us []protocol.Usage) error {
	rs := make([]store.Reply, 0, len(us))
	for _, u := range us {
		if u.Message == "" {
			continue
		}
		rs = append(rs, store.Reply{Message: u.Message, Usage: store.Usage{Model: u.Model,
			Input: u.Input, Output: u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}})
	}
	if err := o.store.Usage.CountReplies(ctx, id, rs, time.Now()); err != nil {
		return err
	}
	o.changed(id)
	o.checkSpend(ctx, id)
	return nil
}

// checkSpend, after the relay counted what a Session spent, holds it at a
// spend cap it is past: its relay refuses its model requests, and it
// sleeps saying why.
func (o *limits) checkSpend(ctx context.Context, id string) {
	s, err := o.store.Sessions.SessionByID(ctx, id)
	if err != nil {
		return
	}
	why, err := spendReached(ctx, o.store, o.opts.MemberMaxSpend, s)
	if err != nil {
		o.log.Error("check a session's spend caps", "session", id, "err", err)
		return
	}
	if why == "" {
		return
	}
	// Not on the Runner's message that told of the count: its lane waits
	// for the answer.
	o.spawn(func(ctx context.Context) {
		if rc := o.opts.Runners.Runner(s.RunnerID); rc != nil {
			if err := rc.Request(ctx, protocol.TypeSessionCapped, protocol.SessionCapped{SessionID: id, Why: "Spend cap reached: " + why + "."}, nil); err != nil {
				o.log.Warn("have the relay refuse a capped session's model requests", "session", id, "err", err)
			}
		}
		o.stopAtLimit(ctx, id, why)
	})
}
