-- Repos Sessions run on, by clone URL (or a path on the Runner's host, for
-- kndl dev).
CREATE TABLE repos (
	id         TEXT PRIMARY KEY,
	url        TEXT NOT NULL UNIQUE,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL
);

CREATE TABLE sessions (
	id             TEXT PRIMARY KEY, -- a UUID: Claude Code's --session-id too
	repo_id        TEXT NOT NULL REFERENCES repos(id),
	creator_id     TEXT NOT NULL REFERENCES users(id),
	runner_id      TEXT NOT NULL REFERENCES runners(id),
	title          TEXT NOT NULL,
	model          TEXT NOT NULL DEFAULT '',
	effort         TEXT NOT NULL DEFAULT '',
	state          TEXT NOT NULL, -- starting, active, asleep, frozen, archived
	state_detail   TEXT NOT NULL DEFAULT '',
	-- Whether Claude Code has written this conversation down, so a wake
	-- resumes it rather than starting afresh.
	conversation   INTEGER NOT NULL DEFAULT 0,
	mod_token_hash BLOB UNIQUE, -- the live run's mod token; NULL while not running
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL
);
CREATE INDEX sessions_by_repo ON sessions(repo_id, created_at);
CREATE INDEX sessions_by_runner ON sessions(runner_id, state);

-- A Session's transcript: one row per Event, numbered per Session.
CREATE TABLE events (
	session_id TEXT NOT NULL REFERENCES sessions(id),
	seq        INTEGER NOT NULL,
	at         INTEGER NOT NULL,
	kind       TEXT NOT NULL,
	data       TEXT NOT NULL, -- JSON, already redacted
	PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;

-- Prompts wait here until delivered, one at a time, between turns.
CREATE TABLE prompts (
	id           TEXT PRIMARY KEY,
	session_id   TEXT NOT NULL REFERENCES sessions(id),
	author_id    TEXT NOT NULL REFERENCES users(id),
	text         TEXT NOT NULL,
	-- Whether a leading ! or / is meant as Claude Code's bash mode or slash
	-- command; otherwise it reaches Claude as text.
	is_command   INTEGER NOT NULL DEFAULT 0,
	-- queued, delivering, delivered, cancelled
	state        TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	delivered_at INTEGER
);
CREATE INDEX prompts_queue ON prompts(session_id, state, created_at);

-- Secrets of a person's own, sealed with HUB_SECRETS_KEY; write-only.
CREATE TABLE user_secrets (
	user_id TEXT NOT NULL REFERENCES users(id),
	name    TEXT NOT NULL, -- 'claude-token'
	sealed  BLOB NOT NULL,
	set_at  INTEGER NOT NULL,
	PRIMARY KEY (user_id, name)
);
