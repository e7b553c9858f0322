-- A Variable set by applying a draft made from a Repo's devcontainer.json
-- names that file in source; '' is a person's (kndl var set, the Repo
-- page), which no file replaces. A draft made from the file keeps the
-- Variables its containerEnv and remoteEnv propose, as JSON; '' for none.
ALTER TABLE variables ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE environment_drafts ADD COLUMN variables TEXT NOT NULL DEFAULT '';
