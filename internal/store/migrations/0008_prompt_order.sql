-- A Session's queue in the order its Creator set: position orders queued
-- prompts (new ones go last, one moved takes its place, one put back goes
-- first).
ALTER TABLE prompts ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
UPDATE prompts SET position = created_at;
CREATE INDEX prompts_order ON prompts(session_id, state, position);
