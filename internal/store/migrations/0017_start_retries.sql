-- How many times the Hub has retried a Session's start since it last came
-- up, so that the backoff and the count in its start log go on across a
-- Hub restart instead of starting again at the first try.
ALTER TABLE sessions ADD COLUMN start_retries INTEGER NOT NULL DEFAULT 0;
