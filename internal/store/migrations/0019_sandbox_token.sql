-- A running Session's current Sandbox token, sealed (HUB_SECRETS_KEY), so
-- a restarted Hub can still revoke it at GitHub once it is replaced or the
-- Session stops; NULL while it has none.
ALTER TABLE sessions ADD COLUMN sandbox_token BLOB;
