package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"kndl.dev/kndl/internal/errdefs"
)

// EnvironmentVersion is one applied version of a Repo's Environment. The
// store keeps its Config as the JSON it is given (environment.Config).
type EnvironmentVersion struct {
	RepoID      string
	Version     int
	Config      string
	BuildDigest string
	// BuildVersion is the version that last changed the Build: Builds are
	// keyed by it, so a change of resources alone makes none.
	BuildVersion int
	Changes      string
	CreatedBy    string
	CreatedAt    time.Time
}

// EnvironmentDraft is the next version being made, from BaseVersion.
type EnvironmentDraft struct {
	RepoID      string
	BaseVersion int
	Config      string
	UpdatedBy   string
	UpdatedAt   time.Time
	// SourcePath and SourceCommit name the devcontainer.json the draft
	// was made from, and Notes what was left out of it, one a line; all
	// empty for a draft made otherwise.
	SourcePath, SourceCommit, Notes string
	// Variables are what the file's containerEnv and remoteEnv propose;
	// ApplyDraft sets them as FilePlan says.
	Variables []FileVariable
}

// TestBuild is a run of a draft's build inputs, named by their digest.
type TestBuild struct {
	ID          string
	RepoID      string
	BuildDigest string
	RunnerID    string
	State       string
	Detail      string
	Log         string
	StartedBy   string
	StartedAt   time.Time
	EndedAt     time.Time
}

// The states of a Test build.
const (
	TestRunning = "running"
	TestPassed  = "passed"
	TestFailed  = "failed"
)

const versionCols = `repo_id, version, config, build_digest, build_version, changes, created_by, created_at`

func scanVersion(row scanner) (EnvironmentVersion, error) {
	var v EnvironmentVersion
	var at int64
	err := row.Scan(&v.RepoID, &v.Version, &v.Config, &v.BuildDigest, &v.BuildVersion, &v.Changes, &v.CreatedBy, &at)
	v.CreatedAt = time.UnixMilli(at)
	return v, err
}

// EnvironmentVersions returns a Repo's versions, newest first: its change
// log.
func (s *Environments) EnvironmentVersions(ctx context.Context, repoID string) ([]EnvironmentVersion, error) {
	return queryAll(ctx, s.db, scanVersion, `SELECT `+versionCols+` FROM environment_versions WHERE repo_id = ? ORDER BY version DESC`, repoID)
}

// CurrentEnvironment returns a Repo's newest version, or ErrNotFound when
// it has none yet (its Sessions run on the Hub's default).
func (s *Environments) CurrentEnvironment(ctx context.Context, repoID string) (EnvironmentVersion, error) {
	v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+versionCols+` FROM environment_versions WHERE repo_id = ? ORDER BY version DESC LIMIT 1`, repoID))
	return v, notFound(err, "an Environment version of the Repo")
}

// EnvironmentVersion returns one version of a Repo's Environment.
func (s *Environments) EnvironmentVersion(ctx context.Context, repoID string, version int) (EnvironmentVersion, error) {
	v, err := scanVersion(s.db.QueryRowContext(ctx, `SELECT `+versionCols+` FROM environment_versions WHERE repo_id = ? AND version = ?`, repoID, version))
	return v, notFound(err, fmt.Sprintf("version %d of the Repo's Environment", version))
}

// SaveDraft makes or replaces a Repo's draft.
func (s *Environments) SaveDraft(ctx context.Context, d EnvironmentDraft) (EnvironmentDraft, error) {
	d.UpdatedAt = s.now()
	_, err := s.exec(ctx, `INSERT INTO environment_drafts (repo_id, base_version, config, updated_by, updated_at, source_path, source_commit, notes, variables)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (repo_id) DO UPDATE SET base_version = excluded.base_version, config = excluded.config,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at, source_path = excluded.source_path,
			source_commit = excluded.source_commit, notes = excluded.notes, variables = excluded.variables`,
		d.RepoID, d.BaseVersion, d.Config, d.UpdatedBy, ms(d.UpdatedAt), d.SourcePath, d.SourceCommit, d.Notes, fileVariablesJSON(d.Variables))
	return d, err
}

// Draft returns a Repo's draft, or ErrNotFound when it has none.
func (s *Environments) Draft(ctx context.Context, repoID string) (EnvironmentDraft, error) {
	var d EnvironmentDraft
	var at int64
	var vars string
	err := s.db.QueryRowContext(ctx, `SELECT repo_id, base_version, config, updated_by, updated_at, source_path, source_commit, notes, variables
		FROM environment_drafts WHERE repo_id = ?`, repoID).
		Scan(&d.RepoID, &d.BaseVersion, &d.Config, &d.UpdatedBy, &at, &d.SourcePath, &d.SourceCommit, &d.Notes, &vars)
	d.UpdatedAt = time.UnixMilli(at)
	if err != nil {
		return d, notFound(err, "a draft of the Repo's Environment")
	}
	d.Variables, err = parseFileVariables(vars)
	return d, err
}

// ApplyDraft makes v the Repo's next version and drops the draft it came
// from, in one transaction; it is refused with ErrConflict when another
// version was applied since the draft's base (the draft is then stale). A
// draft made from a file sets its Variables as FilePlan says, in the same
// transaction, and v's Changes gain a line for each.
func (s *Environments) ApplyDraft(ctx context.Context, v EnvironmentVersion, base int) (EnvironmentVersion, error) {
	err := s.inTx(ctx, storeTurn, func(tx *sql.Tx) error {
		var cur int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM environment_versions WHERE repo_id = ?`, v.RepoID).Scan(&cur); err != nil {
			return err
		}
		if cur != base {
			return fmt.Errorf("version %d was applied since this draft was made from version %d: edit the draft again: %w", cur, base, errdefs.ErrConflict)
		}
		vars, err := s.applyFileVariables(ctx, tx, v.RepoID, v.CreatedBy)
		if err != nil {
			return err
		}
		if len(vars) > 0 {
			v.Changes = strings.Trim(v.Changes+"\n"+strings.Join(vars, "\n"), "\n")
		}
		v.Version, v.CreatedAt = cur+1, s.now()
		if v.BuildVersion == 0 {
			v.BuildVersion = v.Version
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO environment_versions (`+versionCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			v.RepoID, v.Version, v.Config, v.BuildDigest, v.BuildVersion, v.Changes, v.CreatedBy, ms(v.CreatedAt)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM environment_drafts WHERE repo_id = ?`, v.RepoID)
		return err
	})
	return v, err
}

const testCols = `id, repo_id, build_digest, runner_id, state, detail, log, started_by, started_at, ended_at`

func scanTest(row scanner) (TestBuild, error) {
	var t TestBuild
	var started int64
	var ended sql.NullInt64
	err := row.Scan(&t.ID, &t.RepoID, &t.BuildDigest, &t.RunnerID, &t.State, &t.Detail, &t.Log, &t.StartedBy, &started, &ended)
	t.StartedAt, t.EndedAt = time.UnixMilli(started), fromMS(ended)
	return t, err
}

// CreateTestBuild records a Test build as running.
func (s *Environments) CreateTestBuild(ctx context.Context, t TestBuild) (TestBuild, error) {
	t.State, t.StartedAt = TestRunning, s.now()
	_, err := s.exec(ctx, `INSERT INTO environment_tests (id, repo_id, build_digest, runner_id, state, started_by, started_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.RepoID, t.BuildDigest, t.RunnerID, t.State, t.StartedBy, ms(t.StartedAt))
	return t, err
}

// maxTestLog bounds a Test build's log: a script that prints without end
// does not fill the store.
const maxTestLog = 1 << 20

// AppendTestLog adds lines to a Test build's log, up to about maxTestLog.
func (s *Environments) AppendTestLog(ctx context.Context, id, lines string) error {
	_, err := s.exec(ctx, `UPDATE environment_tests SET log = log || ? WHERE id = ? AND length(log) < ?`, lines, id, maxTestLog)
	return err
}

// EndTestBuild records a running Test build's result; one that has ended
// already keeps its result.
func (s *Environments) EndTestBuild(ctx context.Context, id, state, detail string) error {
	_, err := s.exec(ctx, `UPDATE environment_tests SET state = ?, detail = ?, ended_at = ? WHERE id = ? AND state = ?`,
		state, detail, ms(s.now()), id, TestRunning)
	return err
}

// EndRunningTestBuilds fails every Test build still running, as the Hub
// starts: the Runner that ran it reported to a Hub that is gone.
func (s *Environments) EndRunningTestBuilds(ctx context.Context, detail string) error {
	_, err := s.exec(ctx, `UPDATE environment_tests SET state = ?, detail = ?, ended_at = ? WHERE state = ?`,
		TestFailed, detail, ms(s.now()), TestRunning)
	return err
}

// TestBuild returns one Test build of a Repo.
func (s *Environments) TestBuild(ctx context.Context, repoID, id string) (TestBuild, error) {
	t, err := scanTest(s.db.QueryRowContext(ctx, `SELECT `+testCols+` FROM environment_tests WHERE repo_id = ? AND id = ?`, repoID, id))
	return t, notFound(err, "Test build "+id)
}

// LatestTestBuild returns a Repo's newest Test build of the build inputs
// named by digest, or ErrNotFound.
func (s *Environments) LatestTestBuild(ctx context.Context, repoID, digest string) (TestBuild, error) {
	t, err := scanTest(s.db.QueryRowContext(ctx, `SELECT `+testCols+` FROM environment_tests WHERE repo_id = ? AND build_digest = ?
		ORDER BY started_at DESC, rowid DESC LIMIT 1`, repoID, digest))
	return t, notFound(err, "a Test build of these build inputs")
}

// SessionEnvironment returns the Environment version a Session last
// started on (0: the Hub's default).
func (s *Environments) SessionEnvironment(ctx context.Context, id string) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT environment_version FROM sessions WHERE id = ?`, id).Scan(&v)
	return v, notFound(err, "session "+id)
}

// SetSessionEnvironment records the version a Session starts on.
func (s *Environments) SetSessionEnvironment(ctx context.Context, id string, version int) error {
	_, err := s.exec(ctx, `UPDATE sessions SET environment_version = ? WHERE id = ?`, version, id)
	return err
}

// TestBuildByID returns a Test build of any Repo, for its Runner's log.
func (s *Environments) TestBuildByID(ctx context.Context, id string) (TestBuild, error) {
	t, err := scanTest(s.db.QueryRowContext(ctx, `SELECT `+testCols+` FROM environment_tests WHERE id = ?`, id))
	return t, notFound(err, "Test build "+id)
}
