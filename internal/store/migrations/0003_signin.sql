-- GitHub's numeric user id: a login can be renamed and then taken by someone
-- else, an id can't, so a Member is found by it.
ALTER TABLE users ADD COLUMN github_id INTEGER;
CREATE UNIQUE INDEX users_by_github_id ON users(github_id);

-- The Setup link that makes its holder the Owner, once; only its hash. A new
-- one replaces any unused one, until the Hub has an Owner.
CREATE TABLE setup_links (
	hash       BLOB PRIMARY KEY,
	created_at INTEGER NOT NULL,
	used_at    INTEGER
);

-- Invites the Owner made, each for one GitHub login; only the hash of each.
CREATE TABLE invites (
	id           TEXT PRIMARY KEY,
	hash         BLOB NOT NULL UNIQUE,
	github_login TEXT NOT NULL, -- as typed; matched without regard to case
	created_by   TEXT NOT NULL REFERENCES users(id),
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	used_at      INTEGER,
	used_by      TEXT REFERENCES users(id),
	revoked_at   INTEGER
);

-- Browser sign-ins: the hash of each sign-in cookie, when it was made (the
-- absolute lifetime) and last used (the idle lifetime).
CREATE TABLE signins (
	hash       BLOB PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users(id),
	created_at INTEGER NOT NULL,
	used_at    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX signins_by_user ON signins(user_id);
