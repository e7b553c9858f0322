-- Each Repo's Environment, in versions: a version is what Sessions start
-- on, a draft is the next one being made, and a Test build is a run of a
-- draft's build inputs (named by their digest) on a Runner.
CREATE TABLE environment_versions (
	repo_id TEXT NOT NULL REFERENCES repos(id),
	version INTEGER NOT NULL,
	config TEXT NOT NULL,          -- environment.Config as JSON
	build_digest TEXT NOT NULL,    -- of the build inputs, Variables at build included
	build_version INTEGER NOT NULL, -- the version that last changed the Build
	changes TEXT NOT NULL,         -- what changed, one line each, secrets by name only
	created_by TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (repo_id, version)
);
CREATE TABLE environment_drafts (
	repo_id TEXT PRIMARY KEY REFERENCES repos(id),
	base_version INTEGER NOT NULL,
	config TEXT NOT NULL,
	updated_by TEXT NOT NULL,
	updated_at INTEGER NOT NULL
);
CREATE TABLE environment_tests (
	id TEXT PRIMARY KEY,
	repo_id TEXT NOT NULL REFERENCES repos(id),
	build_digest TEXT NOT NULL,
	runner_id TEXT NOT NULL,
	state TEXT NOT NULL,           -- running, passed, failed
	detail TEXT NOT NULL DEFAULT '',
	log TEXT NOT NULL DEFAULT '',  -- redacted
	started_by TEXT NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at INTEGER
);
CREATE INDEX environment_tests_repo ON environment_tests (repo_id, build_digest, state);
-- The version each Session last started on; 0 is the Hub's default.
ALTER TABLE sessions ADD COLUMN environment_version INTEGER NOT NULL DEFAULT 0;
