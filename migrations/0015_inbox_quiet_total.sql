-- Entries that are not news, read or not, so that the news of an inbox is counted like
-- the inbox itself: news = total - quiet_total, unread news = unread - quiet_unread.
-- Before this, `news_only` was counted over the newest 2,000 entries, and at 8 readers
-- under a writer that count was what kept its p99 above 10 ms. Kept by the insert and
-- delete triggers of 0010 (a read-mark does not change whether an entry is news), in
-- the same UPDATE, so it costs no statement more per entry.
ALTER TABLE inbox_counts ADD COLUMN quiet_total INTEGER NOT NULL DEFAULT 0
    CHECK (quiet_total >= 0);

UPDATE inbox_counts
SET quiet_total = (SELECT COUNT(*) FROM inbox i WHERE i.agent_pk = inbox_counts.agent_pk
                                                 AND i.news = 0);

DROP TRIGGER inbox_counts_insert;
DROP TRIGGER inbox_counts_delete;

CREATE TRIGGER inbox_counts_insert AFTER INSERT ON inbox
BEGIN
    UPDATE inbox_counts
    SET total = total + 1, unread = unread + (NEW.read_at IS NULL),
        quiet_unread = quiet_unread + (NEW.read_at IS NULL AND NEW.news = 0),
        quiet_total = quiet_total + (NEW.news = 0)
    WHERE agent_pk = NEW.agent_pk;
END;

CREATE TRIGGER inbox_counts_delete AFTER DELETE ON inbox
BEGIN
    UPDATE inbox_counts
    SET total = total - 1, unread = unread - (OLD.read_at IS NULL),
        quiet_unread = quiet_unread - (OLD.read_at IS NULL AND OLD.news = 0),
        quiet_total = quiet_total - (OLD.news = 0)
    WHERE agent_pk = OLD.agent_pk;
END;
