-- Whether a comment mentioning the App with attempts=N starts an attempt
-- set of N on the Repo: off (0) until someone who may push turns it on.
ALTER TABLE repos ADD COLUMN github_attempts INTEGER NOT NULL DEFAULT 0;
