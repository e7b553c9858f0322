-- Whose words a prompt is when they are not its author's: auto-fix queues
-- a GitHub review's or a failing check's on the Creator's behalf
-- (author_id stays the Creator's), shown as from its source. '' for the
-- author's own.
ALTER TABLE prompts ADD COLUMN source_kind TEXT NOT NULL DEFAULT ''; -- review or check
ALTER TABLE prompts ADD COLUMN source_name TEXT NOT NULL DEFAULT ''; -- the reviewer's login, the check's name
