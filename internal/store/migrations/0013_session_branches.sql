-- The branches a Session pushed, as its transcript's git push output names
-- them, with the pull requests GitHub last listed for each (internal/hub/pulls).
CREATE TABLE session_branches (
	session_id TEXT NOT NULL REFERENCES sessions(id),
	branch     TEXT NOT NULL,
	pushed_at  INTEGER NOT NULL,            -- unix milliseconds, the first push seen
	pulls      TEXT NOT NULL DEFAULT '[]',  -- JSON: the pull requests opened from it
	checked_at INTEGER,                     -- when GitHub was last asked
	PRIMARY KEY (session_id, branch)
);
