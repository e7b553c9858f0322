-- The one refusal a person gets in a thread a day (internal/hub/triggers):
-- when the App last told them there that they may not start a Session. A
-- mention more within the day gets no reply, a Hub restart notwithstanding.
-- Rows older than a day are dropped as new ones come.
CREATE TABLE trigger_refusals (
	repo       TEXT NOT NULL, -- lower-case owner/name on GitHub
	issue      INTEGER NOT NULL,
	github_id  INTEGER NOT NULL, -- GitHub's user id: a login can be renamed
	refused_at INTEGER NOT NULL,
	PRIMARY KEY (repo, issue, github_id)
);
CREATE INDEX trigger_refusals_by_age ON trigger_refusals(refused_at);

-- Whether comments by others than its Creator on the Session's issue or
-- pull request show in its history, as context and never as prompts: the
-- Creator's switch, off by default.
ALTER TABLE sessions ADD COLUMN thread_context INTEGER NOT NULL DEFAULT 0;
