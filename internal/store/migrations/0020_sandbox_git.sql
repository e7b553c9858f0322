-- What git may do with a Session's current Sandbox token, as the Hub last
-- minted it: 'write' (push and pull requests, for a Creator with push
-- permission on the Repo), 'read' (a read-only Creator's), '' before any.
ALTER TABLE sessions ADD COLUMN sandbox_git TEXT NOT NULL DEFAULT '';
