-- The audit log: every act that changes who can do what on the Hub, or what
-- a Session may reach (audit.go). Rows are only ever appended. Each row's
-- hash is the SHA-256 of the row before's hash and this row's content in a
-- canonical encoding (auditHash), so a row changed or removed from outside
-- breaks the chain there, and VerifyAudit says where.
CREATE TABLE audit_log (
	seq      INTEGER PRIMARY KEY, -- 1, 2, 3, ... with no gaps
	at       INTEGER NOT NULL,    -- unix milliseconds
	actor_id TEXT NOT NULL,       -- the user who did it; '' for the Hub's machine or someone not let in
	actor    TEXT NOT NULL,       -- their login or name at the time
	via      TEXT NOT NULL,       -- how they came: browser, cli, github, hub
	addr     TEXT NOT NULL,       -- the client address as the Hub saw it
	action   TEXT NOT NULL,       -- such as invite.made, runner.paired
	target   TEXT NOT NULL,       -- what it was done to, by name; never a secret
	detail   TEXT NOT NULL,
	hash     BLOB NOT NULL
);

-- When the person behind a CLI token last signed in in a browser: the start
-- of the sign-in that approved it (a token made on the Hub's machine counts
-- from when it was made). A privileged act asks it to be recent; older
-- tokens have none, and must be approved again for those acts.
ALTER TABLE cli_tokens ADD COLUMN signed_in_at INTEGER;
