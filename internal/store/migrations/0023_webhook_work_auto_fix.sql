-- A webhook delivery's work is recorded with its id, in one transaction,
-- and cleared once done: a delivery the Hub answered but stopped before
-- acting on is acted on at its next start (GitHub sends it only once).
-- NULL is done, or nothing to do.
ALTER TABLE webhook_deliveries ADD COLUMN work BLOB;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(received_at) WHERE work IS NOT NULL;

-- What the Hub's one reply in a Session's thread last said of the thread's
-- own events (the latest comment taken as a prompt, a check sent back),
-- kept under its status as the reply is edited.
ALTER TABLE session_threads ADD COLUMN note TEXT NOT NULL DEFAULT '';

-- A Repo's auto-fix settings: a failing check on a pull request a Session
-- opened, and a review requesting changes on one, sent back to the
-- Session as a prompt; off by default, at most auto_fix_max of them per
-- pull request.
ALTER TABLE repos ADD COLUMN auto_fix_ci INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repos ADD COLUMN auto_fix_reviews INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repos ADD COLUMN auto_fix_max INTEGER NOT NULL DEFAULT 3;

-- How many failing checks and reviews each pull request had while its
-- Repo's auto-fix was on, sent or not: the count the cap is held to.
CREATE TABLE pull_fixes (
	repo  TEXT NOT NULL, -- lower-case owner/name on GitHub
	pull  INTEGER NOT NULL,
	count INTEGER NOT NULL,
	PRIMARY KEY (repo, pull)
);
-- A failing check names its pull request's branch: the Sessions that
-- pushed it are found by it.
CREATE INDEX session_branches_by_branch ON session_branches(branch);
