-- Each Member's notification webhooks: where the Hub posts their
-- Sessions' events. The secret signs each body (HMAC-SHA256), sealed under
-- HUB_SECRETS_KEY and shown once at creation. A failing endpoint keeps its
-- first failure's time and its last error; after a day of failures it is
-- stopped (stopped_at), until its Member edits it.
CREATE TABLE notify_webhooks (
	id            TEXT PRIMARY KEY,
	user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
	url           TEXT NOT NULL,
	format        TEXT NOT NULL, -- json or slack
	secret        BLOB NOT NULL,
	failing_since INTEGER NOT NULL DEFAULT 0,
	last_error    TEXT NOT NULL DEFAULT '',
	stopped_at    INTEGER NOT NULL DEFAULT 0,
	created_at    INTEGER NOT NULL
);
CREATE INDEX notify_webhooks_by_user ON notify_webhooks(user_id, created_at);

-- The notifications not yet delivered, each a body for one webhook: a Hub
-- restart delivers them. A delivered one is deleted.
CREATE TABLE notify_outbox (
	id         TEXT PRIMARY KEY,
	webhook_id TEXT NOT NULL REFERENCES notify_webhooks(id) ON DELETE CASCADE,
	kind       TEXT NOT NULL,
	body       BLOB NOT NULL,
	tries      INTEGER NOT NULL DEFAULT 0,
	due_at     INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX notify_outbox_by_due ON notify_outbox(due_at);
