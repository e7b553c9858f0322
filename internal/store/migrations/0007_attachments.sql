-- Files a Session's Creator attaches to prompts, kept with the Session
-- (Archived too). Their bytes are in attachment_chunks, in order, so
-- neither an upload nor a download holds a whole file. A row is complete
-- once all its chunks are in; an incomplete one is never shown or sent.
CREATE TABLE attachments (
	id         TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES sessions(id),
	-- The prompt that carries it; NULL until a prompt names it.
	prompt_id  TEXT REFERENCES prompts(id),
	name       TEXT NOT NULL, -- as uploaded, for display
	file       TEXT NOT NULL, -- made safe: its name in the Sandbox
	media_type TEXT NOT NULL, -- sniffed from its bytes, for display only
	size       INTEGER NOT NULL,
	sha256     BLOB,
	-- A text file is stored through the Session's redaction set.
	is_text    INTEGER NOT NULL,
	complete   INTEGER NOT NULL DEFAULT 0,
	created_by TEXT NOT NULL REFERENCES users(id),
	created_at INTEGER NOT NULL
);
CREATE INDEX attachments_by_session ON attachments(session_id, created_at);
CREATE INDEX attachments_by_prompt ON attachments(prompt_id);

CREATE TABLE attachment_chunks (
	attachment_id TEXT NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
	n             INTEGER NOT NULL,
	data          BLOB NOT NULL,
	PRIMARY KEY (attachment_id, n)
);
