-- Attempt sets: one prompt started as several ordinary Sessions at once
-- (kndl new --attempts N), each an attempt at its place in the set.
CREATE TABLE attempt_sets (
	id         TEXT PRIMARY KEY,
	creator_id TEXT NOT NULL REFERENCES users(id),
	repo_id    TEXT NOT NULL REFERENCES repos(id),
	title      TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE attempts (
	set_id     TEXT NOT NULL REFERENCES attempt_sets(id),
	place      INTEGER NOT NULL,
	session_id TEXT NOT NULL UNIQUE REFERENCES sessions(id),
	PRIMARY KEY (set_id, place)
) WITHOUT ROWID;
-- The Environment's check, run in an attempt's Sandbox after a Turn: turn
-- is the seq of that Turn's turn_start, as session_usage's. The exit code
-- and duration are what the Runner measured; output is the end of what it
-- printed, masked. error says why it could not run (exit_code -1 then).
CREATE TABLE turn_checks (
	session_id  TEXT NOT NULL REFERENCES sessions(id),
	turn        INTEGER NOT NULL,
	exit_code   INTEGER NOT NULL,
	duration_ms INTEGER NOT NULL,
	timed_out   INTEGER NOT NULL,
	output      TEXT NOT NULL,
	error       TEXT NOT NULL,
	at          INTEGER NOT NULL,
	PRIMARY KEY (session_id, turn)
) WITHOUT ROWID;
