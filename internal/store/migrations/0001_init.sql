-- People who can sign in. The dev user (kndl dev) has no GitHub login.
CREATE TABLE users (
	id           TEXT PRIMARY KEY,
	github_login TEXT UNIQUE,
	name         TEXT NOT NULL,
	is_owner     INTEGER NOT NULL DEFAULT 0,
	is_dev       INTEGER NOT NULL DEFAULT 0,
	created_at   INTEGER NOT NULL,
	removed_at   INTEGER
);

-- A person's kndl CLI tokens, one per machine signed in; only the hash.
CREATE TABLE cli_tokens (
	id          TEXT PRIMARY KEY,
	user_id     TEXT NOT NULL REFERENCES users(id),
	token_hash  BLOB NOT NULL UNIQUE,
	name        TEXT NOT NULL,
	created_at  INTEGER NOT NULL,
	revoked_at  INTEGER
);

-- Paired Runners; only the hash of each token.
CREATE TABLE runners (
	id           TEXT PRIMARY KEY,
	name         TEXT NOT NULL UNIQUE,
	token_hash   BLOB NOT NULL UNIQUE,
	created_by   TEXT REFERENCES users(id),
	created_at   INTEGER NOT NULL,
	last_seen_at INTEGER,
	revoked_at   INTEGER
);
