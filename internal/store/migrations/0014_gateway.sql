-- MCP servers behind the Hub's Gateway (ADR 0020). A server is Hub-only
-- (id hub:<slug>) for now; auth is none, headers or oauth.
CREATE TABLE mcp_servers (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	url        TEXT NOT NULL,
	auth       TEXT NOT NULL CHECK (auth IN ('none', 'headers', 'oauth')),
	created_by TEXT NOT NULL REFERENCES users(id),
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
);

-- The header secrets a server declares: header gets format with {value}
-- replaced by each Installation's value of key.
CREATE TABLE mcp_server_headers (
	server_id TEXT NOT NULL REFERENCES mcp_servers(id) ON DELETE CASCADE,
	key       TEXT NOT NULL,
	header    TEXT NOT NULL,
	format    TEXT NOT NULL,
	PRIMARY KEY (server_id, key)
);

-- An Installation: a named, configured copy of one server, global (on in
-- every Repo) or on in the Repos installation_repos lists.
CREATE TABLE installations (
	id         TEXT PRIMARY KEY,
	server_id  TEXT NOT NULL REFERENCES mcp_servers(id),
	name       TEXT NOT NULL,
	global     INTEGER NOT NULL,
	created_by TEXT NOT NULL REFERENCES users(id),
	created_at INTEGER NOT NULL
);

CREATE TABLE installation_repos (
	installation_id TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
	repo_id         TEXT NOT NULL REFERENCES repos(id),
	PRIMARY KEY (installation_id, repo_id)
);

-- A Repo that turned an Installation off.
CREATE TABLE installation_off (
	repo_id         TEXT NOT NULL REFERENCES repos(id),
	installation_id TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
	PRIMARY KEY (repo_id, installation_id)
);

-- An Installation's header secret values, sealed under HUB_SECRETS_KEY
-- and write-only.
CREATE TABLE installation_values (
	installation_id TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
	key             TEXT NOT NULL,
	sealed          BLOB NOT NULL,
	set_by          TEXT NOT NULL REFERENCES users(id),
	set_at          INTEGER NOT NULL,
	PRIMARY KEY (installation_id, key)
);

-- Each Repo's log of Installation changes; repo_id NULL is a change to a
-- global Installation, in every Repo's log. Secrets are named by title.
CREATE TABLE installation_log (
	seq             INTEGER PRIMARY KEY AUTOINCREMENT,
	repo_id         TEXT REFERENCES repos(id),
	installation_id TEXT NOT NULL,
	at              INTEGER NOT NULL,
	actor_id        TEXT NOT NULL REFERENCES users(id),
	what            TEXT NOT NULL
);
CREATE INDEX installation_log_by_repo ON installation_log(repo_id, seq);

-- The Installations a Session's run started with, each with the server's
-- URL then and its headers sealed for this Session: a Session runs with
-- the values it started with. Replaced at each start.
CREATE TABLE session_installations (
	session_id      TEXT NOT NULL REFERENCES sessions(id),
	installation_id TEXT NOT NULL,
	name            TEXT NOT NULL,
	url             TEXT NOT NULL,
	headers         BLOB NOT NULL,
	PRIMARY KEY (session_id, installation_id)
);

-- An OAuth server's Installation: its client (registered by the Hub, or
-- entered) and its tokens, each sealed under HUB_SECRETS_KEY, with who
-- set them and when.
CREATE TABLE installation_oauth (
	installation_id TEXT PRIMARY KEY REFERENCES installations(id) ON DELETE CASCADE,
	client          BLOB,
	client_by       TEXT REFERENCES users(id),
	client_at       INTEGER,
	tokens          BLOB,
	tokens_by       TEXT REFERENCES users(id),
	tokens_at       INTEGER
);

-- OAuth flows under way: a state, kept as its SHA-256, bound to the person
-- who began it and the Installation, with its PKCE verifier sealed; used
-- once, and for at most ten minutes.
CREATE TABLE oauth_states (
	hash            BLOB PRIMARY KEY,
	installation_id TEXT NOT NULL REFERENCES installations(id) ON DELETE CASCADE,
	user_id         TEXT NOT NULL REFERENCES users(id),
	verifier        BLOB NOT NULL,
	expires_at      INTEGER NOT NULL
);
