-- An attempt is ready once its first Turn, and that Turn's check where
-- the Environment names one, ended; a set once all its attempts are, which
-- its Creator is told once (attempts_ready): the set's ready_at marks it
-- told, so a Hub restart tells it no second time.
ALTER TABLE attempts ADD COLUMN ready_at INTEGER;
ALTER TABLE attempt_sets ADD COLUMN ready_at INTEGER;
