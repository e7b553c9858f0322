-- Values a running Session must keep masking though they were replaced
-- meanwhile (it started with them), sealed, so a Hub restart keeps them
-- masked; dropped when the Session stops.
CREATE TABLE session_masks (
	session_id TEXT NOT NULL REFERENCES sessions(id),
	sealed     BLOB NOT NULL
);
CREATE INDEX session_masks_by_session ON session_masks(session_id);
