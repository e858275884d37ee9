-- Each recipient's newest inbox seq, kept as a counter that never goes back.
--
-- The writer numbered a recipient's next entry `MAX(seq) + 1` of its inbox. Retention
-- can empty an inbox (every entry read and old); numbering then started again at 1, so
-- a client that remembered seq 500 and reconnected with `since=500` (or the agent's
-- saved cursor) was told it had seen the new entries 1, 2, 3 — it never got them live
-- or in a replay — and a client dropping duplicates by seq dropped them. Kept here,
-- raised by the insert trigger in the statement that inserts (so it commits with the
-- entry), the number goes on from where it was. The starting value is past every seq
-- the agent holds or has acknowledged, over a live connection or on a STOMP queue.

ALTER TABLE inbox_counts ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0);

UPDATE inbox_counts
SET last_seq = MAX(
    COALESCE((SELECT MAX(i.seq) FROM inbox i WHERE i.agent_pk = inbox_counts.agent_pk), 0),
    COALESCE((SELECT a.acked_seq FROM agents a WHERE a.pk = inbox_counts.agent_pk), 0),
    COALESCE((SELECT MAX(q.acked_seq) FROM queue_cursors q
              WHERE q.agent_pk = inbox_counts.agent_pk), 0));

DROP TRIGGER inbox_counts_insert;

CREATE TRIGGER inbox_counts_insert AFTER INSERT ON inbox
BEGIN
    UPDATE inbox_counts
    SET total = total + 1, unread = unread + (NEW.read_at IS NULL),
        quiet_unread = quiet_unread + (NEW.read_at IS NULL AND NEW.news = 0),
        quiet_total = quiet_total + (NEW.news = 0),
        last_seq = MAX(last_seq, NEW.seq)
    WHERE agent_pk = NEW.agent_pk;
END;
