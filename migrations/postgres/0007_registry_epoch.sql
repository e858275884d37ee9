-- Revocation across nodes (docs/architecture.md, "No stale yes across nodes"). Every
-- change of a team or an agent takes a number from `registry_epoch` after it commits;
-- each node writes into its `nodes` row the newest number it had read before its last
-- registry reload. The node that made the change answers only when every node with a
-- fresh heartbeat has reached its number (or has gone stale and fences itself).
CREATE SEQUENCE registry_epoch;
ALTER TABLE nodes ADD COLUMN registry_seen BIGINT NOT NULL DEFAULT 0;
