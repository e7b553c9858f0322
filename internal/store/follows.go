package store

import (
	"context"
	"time"
)

// EnvironmentFollow is a Repo following its devcontainer.json at Path,
// its drafts made and tested as UserID.
type EnvironmentFollow struct {
	RepoID, Path, UserID string
	UpdatedAt            time.Time
}

// SetFollow makes f the Repo's follow, replacing any.
func (s *Environments) SetFollow(ctx context.Context, f EnvironmentFollow) error {
	_, err := s.exec(ctx, `INSERT INTO environment_follows (repo_id, path, user_id, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (repo_id) DO UPDATE SET path = excluded.path, user_id = excluded.user_id, updated_at = excluded.updated_at`,
		f.RepoID, f.Path, f.UserID, ms(s.now()))
	return err
}

// StopFollow ends the Repo's follow; none is no error.
func (s *Environments) StopFollow(ctx context.Context, repoID string) error {
	_, err := s.exec(ctx, `DELETE FROM environment_follows WHERE repo_id = ?`, repoID)
	return err
}

// Follow returns the Repo's follow, or ErrNotFound when it follows none.
func (s *Environments) Follow(ctx context.Context, repoID string) (EnvironmentFollow, error) {
	var f EnvironmentFollow
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT repo_id, path, user_id, updated_at FROM environment_follows WHERE repo_id = ?`, repoID).
		Scan(&f.RepoID, &f.Path, &f.UserID, &at)
	f.UpdatedAt = time.UnixMilli(at)
	return f, notFound(err, "a follow of the Repo's devcontainer.json")
}
