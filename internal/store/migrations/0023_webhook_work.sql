-- A webhook delivery's work is recorded with its id, in one transaction,
-- and cleared once done: a delivery the Hub answered but stopped before
-- acting on is acted on at its next start (GitHub sends it only once).
-- NULL is done, or nothing to do.
ALTER TABLE webhook_deliveries ADD COLUMN work BLOB;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(received_at) WHERE work IS NOT NULL;
