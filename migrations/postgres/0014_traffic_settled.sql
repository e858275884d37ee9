-- The team's timeline (`GET /v1/teams/{team_id}/messages?after=`) is followed by key,
-- and keys come from a sequence when a row is written, not when it commits: with two
-- nodes writing, key 11 can commit before key 10, and a reader that saw 11 moved past 10
-- for good. Each message now records the transaction that wrote it; the timeline shows
-- a message once every transaction that could still commit before it has ended
-- (`tx < pg_snapshot_xmin(pg_current_snapshot())`), in the order of (tx, pk)
-- (docs/architecture.md). Rows from before this migration get the constant 1, which
-- costs no table rewrite and sorts them first, by key, as they were.
ALTER TABLE messages ADD COLUMN tx xid8 NOT NULL DEFAULT '1';
ALTER TABLE messages ALTER COLUMN tx SET DEFAULT pg_current_xact_id();
CREATE INDEX messages_by_team_tx ON messages (team_pk, tx, pk);
