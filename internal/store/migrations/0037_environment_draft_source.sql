-- A draft made from a Repo's devcontainer.json names the file and the
-- commit it was read at, and keeps the notes on what was left out of it,
-- one a line. A draft made otherwise has none of them.
ALTER TABLE environment_drafts ADD COLUMN source_path TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_drafts ADD COLUMN source_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_drafts ADD COLUMN notes TEXT NOT NULL DEFAULT '';

-- A Repo that follows its devcontainer.json: a push changing the file at
-- path makes a new draft and starts its Test build as user_id, the Member
-- who turned it on.
CREATE TABLE environment_follows (
	repo_id    TEXT PRIMARY KEY REFERENCES repos(id),
	path       TEXT NOT NULL,
	user_id    TEXT NOT NULL REFERENCES users(id),
	updated_at INTEGER NOT NULL
);
