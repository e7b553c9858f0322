-- How far the Runner has read a Session's transcript files, so a follower
-- started again (a wake, a restarted Runner) resumes there: JSON
-- {"<file>": offset}.
ALTER TABLE sessions ADD COLUMN transcript_offsets TEXT NOT NULL DEFAULT '{}';
