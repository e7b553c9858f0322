-- The SHA-256 of each webhook delivery's body, hex: a signed body seen
-- within a day is a duplicate whatever X-GitHub-Delivery it carries (that
-- header is not signed, so a captured delivery could be replayed under a
-- fresh one). NULL for the deliveries taken before it was kept.
ALTER TABLE webhook_deliveries ADD COLUMN digest TEXT;
CREATE INDEX webhook_deliveries_by_digest ON webhook_deliveries(digest);
