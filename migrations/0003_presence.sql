-- Live push: where each agent's cursor is, and when it was last seen.
--
-- acked_seq: the highest inbox sequence number the agent acknowledged over the
-- WebSocket; a reconnect without ?since= resumes after it. Acks are kept in memory and
-- written in batches, so after a crash a client may see a few entries again (delivery is
-- at-least-once; seq lets it drop duplicates).
ALTER TABLE agents ADD COLUMN acked_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agents ADD COLUMN last_seen_at INTEGER;
