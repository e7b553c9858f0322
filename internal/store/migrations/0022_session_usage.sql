-- What each model reply of a Session spent, one row per reply by its id
-- (msg_…). Claude Code writes a reply's blocks as records of their own,
-- each with the reply's usage, and a Runner sends a batch again after a
-- reconnect: a reply is counted once here, with the largest counts it was
-- seen with. turn is the seq of the top-level turn_start the reply came
-- after (0 before any): its Turn.
CREATE TABLE session_usage (
	session_id  TEXT NOT NULL REFERENCES sessions(id),
	message     TEXT NOT NULL,
	turn        INTEGER NOT NULL,
	model       TEXT NOT NULL,
	input       INTEGER NOT NULL,
	output      INTEGER NOT NULL,
	cache_read  INTEGER NOT NULL,
	cache_write INTEGER NOT NULL,
	at          INTEGER NOT NULL,
	PRIMARY KEY (session_id, message)
) WITHOUT ROWID;
CREATE INDEX session_usage_by_time ON session_usage(at);
-- Each Session's Turn starts, so the Turn a reply comes in is found
-- without reading the transcript back to it.
CREATE INDEX events_turn_starts ON events(session_id, seq) WHERE kind = 'turn_start';
