package store

import (
	"context"
	"database/sql"
	"time"
)

// SessionBranch is a branch a Session pushed to its Repo.
type SessionBranch struct {
	SessionID string
	Branch    string
	PushedAt  time.Time
	// Pulls is the JSON list of the pull requests GitHub last listed for
	// it, as internal/hub/pulls writes it; CheckedAt when that was.
	Pulls     []byte
	CheckedAt time.Time
	// RepoURL is the Session's Repo.
	RepoURL string
}

const branchCols = `b.session_id, b.branch, b.pushed_at, b.pulls, b.checked_at, r.url`
const branchFrom = ` FROM session_branches b JOIN sessions s ON s.id = b.session_id JOIN repos r ON r.id = s.repo_id `

func scanBranch(row scanner) (SessionBranch, error) {
	var b SessionBranch
	var pushed int64
	var checked sql.NullInt64
	var pulls string
	err := row.Scan(&b.SessionID, &b.Branch, &pushed, &pulls, &checked, &b.RepoURL)
	b.PushedAt, b.Pulls, b.CheckedAt = time.UnixMilli(pushed), []byte(pulls), fromMS(checked)
	return b, err
}

// AddSessionBranches records branches a Session pushed, keeping at most
// max for it: one it has already keeps its first push, and new ones past
// max are dropped. A branch belongs to the first Session of its Repo
// recorded with it, and never moves: one another Session of the Repo
// holds is not recorded, nor counted as added or dropped. It returns how
// many it recorded and how many it dropped.
func (s *Branches) AddSessionBranches(ctx context.Context, sessionID string, branches []string, at time.Time, max int) (added, dropped int, err error) {
	err = s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		added, dropped = 0, 0
		have, err := queryAll(ctx, tx, scanString, `SELECT branch FROM session_branches WHERE session_id = ?`, sessionID)
		if err != nil {
			return err
		}
		known := make(map[string]bool, len(have))
		for _, br := range have {
			known[br] = true
		}
		for _, br := range branches {
			if known[br] {
				continue
			}
			var others int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM session_branches b JOIN sessions s ON s.id = b.session_id
				WHERE b.branch = ? AND b.session_id <> ? AND s.repo_id = (SELECT repo_id FROM sessions WHERE id = ?)`, br, sessionID, sessionID).Scan(&others); err != nil {
				return err
			}
			if others > 0 {
				known[br] = true // another Session's: never this one's
				continue
			}
			full := len(known) >= max // once full, known only grows by the dropped
			known[br] = true
			if full {
				dropped++
				continue
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO session_branches (session_id, branch, pushed_at) VALUES (?, ?, ?)
				ON CONFLICT (session_id, branch) DO NOTHING`, sessionID, br, ms(at)); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	return added, dropped, err
}

// SessionBranches lists the branches a Session pushed, oldest first.
func (s *Branches) SessionBranches(ctx context.Context, sessionID string) ([]SessionBranch, error) {
	defer s.timed("session_branches")()
	return queryAll(ctx, s.db, scanBranch, `SELECT `+branchCols+branchFrom+`WHERE b.session_id = ? ORDER BY b.pushed_at, b.branch`, sessionID)
}

// SessionsBranches is SessionBranches of each of the Sessions, keyed by
// Session id: one query for a list's rows, up to idChunk of them.
func (s *Branches) SessionsBranches(ctx context.Context, ids []string) (map[string][]SessionBranch, error) {
	defer s.timed("sessions_branches")()
	out := map[string][]SessionBranch{}
	err := eachChunk(ids, func(in string, args []any) error {
		bs, err := queryAll(ctx, s.db, scanBranch, `SELECT `+branchCols+branchFrom+`WHERE b.session_id IN (`+in+`) ORDER BY b.session_id, b.pushed_at, b.branch`, args...)
		for _, b := range bs {
			out[b.SessionID] = append(out[b.SessionID], b)
		}
		return err
	})
	return out, err
}

// BranchesToCheck lists the branches of Sessions not archived, those GitHub
// was asked about longest ago first.
func (s *Branches) BranchesToCheck(ctx context.Context, limit int) ([]SessionBranch, error) {
	return queryAll(ctx, s.db, scanBranch, `SELECT `+branchCols+branchFrom+`WHERE s.state <> ? ORDER BY COALESCE(b.checked_at, 0), b.pushed_at LIMIT ?`, Archived, limit)
}

// SetBranchPulls records the pull requests GitHub listed for a branch.
func (s *Branches) SetBranchPulls(ctx context.Context, sessionID, branch string, pulls []byte, at time.Time) error {
	_, err := s.exec(ctx, `UPDATE session_branches SET pulls = ?, checked_at = ? WHERE session_id = ? AND branch = ?`,
		string(pulls), ms(at), sessionID, branch)
	return err
}
