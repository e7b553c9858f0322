-- Spend caps (internal/hub/session, spend.go), off by default (0): what a
-- Repo's Sessions may spend in a day (UTC), and what one of its Sessions
-- may spend in all, in millionths of a US dollar as the price table
-- estimates it from the relay's counts.
ALTER TABLE repos ADD COLUMN max_spend_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repos ADD COLUMN max_session_spend_micros INTEGER NOT NULL DEFAULT 0;
