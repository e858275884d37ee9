-- Reads of a large inbox that do not depend on its size.
--
-- `unread_only` is the question every agent asks ("what have I not read?"), so it gets
-- its own index: only unread entries are in it, so it stays as small as the unread part
-- of the inbox, and a page of unread entries never walks read ones. Other filters walk
-- at most a window of sequence numbers per page (see src/store/sqlite/inbox.rs).
CREATE INDEX inbox_unread ON inbox (agent_pk, seq) WHERE read_at IS NULL;

-- A thread is read from its messages, not by walking the inbox for them.
CREATE INDEX messages_by_thread ON messages (thread_id) WHERE thread_id IS NOT NULL;

-- Messages sent and responses given per agent, for team metrics, kept beside the inbox
-- counters by triggers in the same transaction (GROUP BYs over the team's messages and
-- responses grew with them).
ALTER TABLE inbox_counts ADD COLUMN sent INTEGER NOT NULL DEFAULT 0 CHECK (sent >= 0);
ALTER TABLE inbox_counts ADD COLUMN responded INTEGER NOT NULL DEFAULT 0 CHECK (responded >= 0);

UPDATE inbox_counts
SET sent = (SELECT COUNT(*) FROM messages m WHERE m.sender_pk = inbox_counts.agent_pk),
    responded = (SELECT COUNT(*) FROM responses r WHERE r.responder_pk = inbox_counts.agent_pk);

CREATE TRIGGER inbox_counts_sent AFTER INSERT ON messages
BEGIN
    UPDATE inbox_counts SET sent = sent + 1 WHERE agent_pk = NEW.sender_pk;
END;

CREATE TRIGGER inbox_counts_unsent AFTER DELETE ON messages
BEGIN
    UPDATE inbox_counts SET sent = sent - 1 WHERE agent_pk = OLD.sender_pk;
END;

CREATE TRIGGER inbox_counts_responded AFTER INSERT ON responses
BEGIN
    UPDATE inbox_counts SET responded = responded + 1 WHERE agent_pk = NEW.responder_pk;
END;

CREATE TRIGGER inbox_counts_unresponded AFTER DELETE ON responses
BEGIN
    UPDATE inbox_counts SET responded = responded - 1 WHERE agent_pk = OLD.responder_pk;
END;
