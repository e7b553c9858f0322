-- Whose a Runner is: the Member who paired it (created_by) may run their
-- Sessions on it, and everyone may once the Owner shares it. A Runner paired
-- on the Hub's own machine (kndl runner token create, no created_by) is the
-- Hub's, and shared.
ALTER TABLE runners ADD COLUMN shared INTEGER NOT NULL DEFAULT 0;
UPDATE runners SET shared = 1 WHERE created_by IS NULL;
-- A removed Member's Runners go with them, as RemoveMember now does; their
-- Sessions there fail as the Hub starts (session.Owner.Recover).
UPDATE runners SET revoked_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000
	WHERE revoked_at IS NULL AND created_by IN (SELECT id FROM users WHERE removed_at IS NOT NULL);
