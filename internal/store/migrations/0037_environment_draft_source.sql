-- A draft made from a Repo's devcontainer.json names the file and the
-- commit it was read at, and keeps the notes on what was left out of it,
-- one a line. A draft made otherwise has none of them.
ALTER TABLE environment_drafts ADD COLUMN source_path TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_drafts ADD COLUMN source_commit TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_drafts ADD COLUMN notes TEXT NOT NULL DEFAULT '';
