-- Forks (kndl fork): a Session started as a copy of another, its parent,
-- as it was at the end of one of its Turns. Both are one Creator's.
CREATE TABLE session_forks (
	session_id TEXT PRIMARY KEY REFERENCES sessions(id),
	parent_id  TEXT NOT NULL REFERENCES sessions(id),
	turn       INTEGER NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE INDEX session_forks_parent ON session_forks (parent_id, created_at);
