-- Limits that fail closed (internal/hub/session, limits.go). A Session a
-- GitHub trigger started runs unattended, so its Repo's limits hold it: at
-- most max_turns Turns and max_turn_ms of Turn time (0 is no limit).
-- turns and turn_ms count every Session's Turns and their time as the Hub
-- sees them start and end.
ALTER TABLE sessions ADD COLUMN triggered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN turn_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repos ADD COLUMN max_turns INTEGER NOT NULL DEFAULT 20;
ALTER TABLE repos ADD COLUMN max_turn_ms INTEGER NOT NULL DEFAULT 7200000;

-- A Member's line for an awake place (HUB_MEMBER_MAX_AWAKE): the number
-- the Session took as it joined a line, one count for all (two joining in
-- one millisecond still have an order), NULL while it is in none. In the
-- store, so the line outlives a Hub restart.
ALTER TABLE sessions ADD COLUMN line_seq INTEGER;
CREATE INDEX sessions_line ON sessions(creator_id, line_seq);
