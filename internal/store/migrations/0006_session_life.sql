-- A Session's life: Failed joins the states (starting, active, frozen,
-- asleep, failed, archived); Keep awake is the Creator's switch; a Failed
-- start records whether a retry may help; archived_at starts the purge
-- clock.
ALTER TABLE sessions ADD COLUMN keep_awake INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN transient INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN archived_at INTEGER;
