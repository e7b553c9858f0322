-- Variables: a Repo's own (repo_id set) or Shared at Hub level (repo_id
-- NULL). A Sensitive value is sealed under HUB_SECRETS_KEY and write-only;
-- a plain one is kept as it is.
CREATE TABLE variables (
	id         TEXT PRIMARY KEY,
	repo_id    TEXT REFERENCES repos(id),
	name       TEXT NOT NULL,
	value      TEXT,           -- plain values
	sealed     BLOB,           -- Sensitive values
	sensitive  INTEGER NOT NULL,
	at_build   INTEGER NOT NULL,
	set_by     TEXT NOT NULL REFERENCES users(id),
	set_at     INTEGER NOT NULL,
	CHECK ((sensitive = 1) = (sealed IS NOT NULL AND value IS NULL))
);
CREATE UNIQUE INDEX variables_repo_name ON variables(coalesce(repo_id, ''), name);

-- The Shared variables a Repo uses.
CREATE TABLE variable_links (
	repo_id     TEXT NOT NULL REFERENCES repos(id),
	variable_id TEXT NOT NULL REFERENCES variables(id) ON DELETE CASCADE,
	linked_by   TEXT NOT NULL REFERENCES users(id),
	linked_at   INTEGER NOT NULL,
	PRIMARY KEY (repo_id, variable_id)
);
