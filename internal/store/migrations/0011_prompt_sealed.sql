-- A prompt's text is kept sealed under HUB_SECRETS_KEY until it is
-- delivered and after: a person may paste a credential into a prompt, and
-- it must reach Claude exactly, so it can't be masked at rest. text stays
-- empty for a sealed prompt; rows from before keep theirs.
ALTER TABLE prompts ADD COLUMN sealed BLOB;
