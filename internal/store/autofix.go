package store

import "context"

// AutoFix is a Repo's auto-fix settings: whether a failing check (CI) or a
// review requesting changes (Reviews) on a pull request a Session opened
// is sent back to the Session, at most Max times per pull request.
type AutoFix struct {
	CI, Reviews bool
	Max         int
}

// DefaultAutoFixMax is how many times a pull request's failures are sent
// back to its Session unless the Repo says otherwise.
const DefaultAutoFixMax = 3

// RepoAutoFix returns the Repo's auto-fix settings.
func (s *Repos) RepoAutoFix(ctx context.Context, repoID string) (AutoFix, error) {
	var a AutoFix
	err := s.db.QueryRowContext(ctx, `SELECT auto_fix_ci, auto_fix_reviews, auto_fix_max FROM repos WHERE id = ?`, repoID).
		Scan(&a.CI, &a.Reviews, &a.Max)
	return a, notFound(err, "repo "+repoID)
}

// SetRepoAutoFix sets the Repo's auto-fix settings.
func (s *Repos) SetRepoAutoFix(ctx context.Context, repoID string, a AutoFix) error {
	_, err := s.exec(ctx, `UPDATE repos SET auto_fix_ci = ?, auto_fix_reviews = ?, auto_fix_max = ? WHERE id = ?`,
		a.CI, a.Reviews, a.Max, repoID)
	return err
}

// CountFix counts one more failure of pull request pull of repo (lower-case
// owner/name) and returns how many it has had. The count is named by its
// table: PostgreSQL's upsert would take a bare one for the row proposed
// as well as the row kept.
func (s *Branches) CountFix(ctx context.Context, repo string, pull int) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `INSERT INTO pull_fixes (repo, pull, count) VALUES (?, ?, 1)
		ON CONFLICT (repo, pull) DO UPDATE SET count = pull_fixes.count + 1 RETURNING pull_fixes.count`, repo, pull).Scan(&n)
	return n, err
}

// BranchSessions lists the Sessions not archived that hold branch, each
// with its Repo's URL: one a Repo since a branch belongs to the first
// Session recorded with it (AddSessionBranches); rows from before that
// rule are listed first push first, so the first is still its owner.
func (s *Branches) BranchSessions(ctx context.Context, branch string) ([]SessionBranch, error) {
	return queryAll(ctx, s.db, scanBranch, `SELECT `+branchCols+branchFrom+`WHERE b.branch = ? AND s.state <> ? ORDER BY b.pushed_at, b.session_id`, branch, Archived)
}
