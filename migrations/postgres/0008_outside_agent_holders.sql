-- An outside A2A agent is acted for by one node at a time (docs/architecture.md, the
-- per-node caches): the node holding it renews its hold every few seconds; another node
-- takes it over only once the hold ran out (the holder died or lost the database).
-- Times are the database's own clock, so the nodes' clocks do not matter here.
ALTER TABLE a2a_remotes ADD COLUMN held_by TEXT;
ALTER TABLE a2a_remotes ADD COLUMN held_until TIMESTAMPTZ;
