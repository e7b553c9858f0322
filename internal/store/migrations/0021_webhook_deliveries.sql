-- The GitHub webhook deliveries the Hub took, by GitHub's id for each
-- (X-GitHub-Delivery): a redelivery finds its id here and changes nothing,
-- across a restart too. Ids older than a week are dropped as new ones come
-- (GitHub redelivers for three days at most).
CREATE TABLE webhook_deliveries (
	id          TEXT PRIMARY KEY,
	event       TEXT NOT NULL,
	received_at INTEGER NOT NULL
);
CREATE INDEX webhook_deliveries_by_age ON webhook_deliveries(received_at);

-- The Sessions started from a GitHub issue's or pull request's thread:
-- where a later comment by the Creator is a prompt, and the Hub's one reply
-- there, which it edits rather than adding more.
CREATE TABLE session_threads (
	session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
	repo       TEXT NOT NULL, -- lower-case owner/name on GitHub
	issue      INTEGER NOT NULL,
	reply_id   INTEGER NOT NULL DEFAULT 0, -- the Hub's comment; 0 until posted
	created_at INTEGER NOT NULL
);
CREATE INDEX session_threads_by_issue ON session_threads(repo, issue, created_at);

-- A Repo's trigger label: added to an issue, it starts a Session as a
-- mention of the App does. '' is none.
ALTER TABLE repos ADD COLUMN trigger_label TEXT NOT NULL DEFAULT '';
