-- The Hub's metrics token, for a Prometheus scraper: at most one is live,
-- kept only as its SHA-256 (internal/auth.Hash). Making a new one replaces it.
CREATE TABLE metrics_token (
	one INTEGER PRIMARY KEY CHECK (one = 1),
	token_hash BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
