-- The mark a Member with push sets on a Variable whose name changes how a
-- tool loads code or reaches the network (internal/loadscode): such a
-- Variable is set only with it. A row stored before has 0, and keeps
-- reaching Sessions as it did: the rule is read when a Variable is set.
ALTER TABLE variables ADD COLUMN loads_code INTEGER NOT NULL DEFAULT 0;
