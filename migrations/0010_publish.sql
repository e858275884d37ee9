-- no-transaction
--
-- Publish and watch (MetaGPT-style): a new message kind, `publish`, with the tag that
-- produced it (`cause_by`), its address set (`send_to`) and its structured output
-- (`instruct_content`); per inbox entry whether it is news for its recipient; per agent
-- its addresses and watched tags; and the counters a team's activity reads.
--
-- `messages` is rebuilt (as in 0005) because its kind CHECK gains a value; the rebuild
-- copies every row once, so upgrading a large database takes a while at start-up.

PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

CREATE TABLE messages_rebuilt (
    pk                INTEGER PRIMARY KEY,
    message_id        TEXT NOT NULL UNIQUE,
    team_pk           INTEGER NOT NULL REFERENCES teams (pk),
    kind              TEXT NOT NULL
        CHECK (kind = 'message' OR kind = 'response' OR kind = 'broadcast'
               OR kind = 'assistance_request' OR kind = 'task' OR kind = 'publish'),
    sender_pk         INTEGER NOT NULL REFERENCES agents (pk),
    -- the sender's role when it sent (roles change; history should not)
    sender_role       TEXT NOT NULL,
    message_type      TEXT NOT NULL
        CHECK (message_type = 'information' OR message_type = 'request'
               OR message_type = 'response' OR message_type = 'coordination'),
    priority          TEXT NOT NULL
        CHECK (priority = 'low' OR priority = 'normal' OR priority = 'high'
               OR priority = 'urgent'),
    -- JSON: {"text": …, "data": {…}?, "attachments": […]?}
    content           TEXT NOT NULL,
    requires_response INTEGER NOT NULL CHECK (requires_response IN (0, 1)),
    response_deadline INTEGER,
    context_reference TEXT,
    thread_id         TEXT,
    in_reply_to       TEXT,
    -- for kind = 'response': completed | partial | unable | delegated
    response_status   TEXT,
    -- JSON array of the agent ids the message was addressed to (after "ALL" expansion)
    recipient_ids     TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    -- for kind = 'publish': the tag, the address set as sent (JSON array) and the
    -- structured output (JSON), all NULL for other kinds
    cause_by          TEXT,
    send_to           TEXT,
    instruct_content  TEXT
) STRICT;

INSERT INTO messages_rebuilt
    (pk, message_id, team_pk, kind, sender_pk, sender_role, message_type, priority, content,
     requires_response, response_deadline, context_reference, thread_id, in_reply_to,
     response_status, recipient_ids, created_at)
SELECT pk, message_id, team_pk, kind, sender_pk, sender_role, message_type, priority, content,
       requires_response, response_deadline, context_reference, thread_id, in_reply_to,
       response_status, recipient_ids, created_at
FROM messages;

DROP TABLE messages;

ALTER TABLE messages_rebuilt RENAME TO messages;

-- What 0002, 0005 and 0008 built on `messages`, which the DROP took with it.
CREATE INDEX messages_by_team ON messages (team_pk);
CREATE INDEX messages_by_thread ON messages (thread_id) WHERE thread_id IS NOT NULL;

CREATE TRIGGER inbox_counts_sent AFTER INSERT ON messages
BEGIN
    UPDATE inbox_counts SET sent = sent + 1 WHERE agent_pk = NEW.sender_pk;
END;

CREATE TRIGGER inbox_counts_unsent AFTER DELETE ON messages
BEGIN
    UPDATE inbox_counts SET sent = sent - 1 WHERE agent_pk = OLD.sender_pk;
END;

-- Per entry: 0 when a publish reached the agent without being news for it (its tag is
-- not watched and its send_to does not name the agent); 1 for every other entry. The
-- tag is copied like the other filter columns, so the `cause_by` filter stays on `inbox`.
ALTER TABLE inbox ADD COLUMN news INTEGER NOT NULL DEFAULT 1 CHECK (news = 0 OR news = 1);
ALTER TABLE inbox ADD COLUMN cause_by TEXT;

-- Unread entries that are not news, so that unread news = unread - quiet_unread. Kept by
-- the same triggers as `total` and `unread` (0007), rewritten to move all three in one
-- UPDATE: a publish leaves most of its entries quiet, and a second UPDATE per entry
-- (a trigger of its own) cost a tenth of publish throughput.
ALTER TABLE inbox_counts ADD COLUMN quiet_unread INTEGER NOT NULL DEFAULT 0
    CHECK (quiet_unread >= 0);

DROP TRIGGER inbox_counts_insert;
DROP TRIGGER inbox_counts_read;
DROP TRIGGER inbox_counts_delete;

CREATE TRIGGER inbox_counts_insert AFTER INSERT ON inbox
BEGIN
    UPDATE inbox_counts
    SET total = total + 1, unread = unread + (NEW.read_at IS NULL),
        quiet_unread = quiet_unread + (NEW.read_at IS NULL AND NEW.news = 0)
    WHERE agent_pk = NEW.agent_pk;
END;

CREATE TRIGGER inbox_counts_read AFTER UPDATE OF read_at ON inbox
WHEN (OLD.read_at IS NULL) <> (NEW.read_at IS NULL)
BEGIN
    UPDATE inbox_counts
    SET unread = unread + (NEW.read_at IS NULL) - (OLD.read_at IS NULL),
        quiet_unread = quiet_unread
            + (NEW.news = 0) * ((NEW.read_at IS NULL) - (OLD.read_at IS NULL))
    WHERE agent_pk = NEW.agent_pk;
END;

CREATE TRIGGER inbox_counts_delete AFTER DELETE ON inbox
BEGIN
    UPDATE inbox_counts
    SET total = total - 1, unread = unread - (OLD.read_at IS NULL),
        quiet_unread = quiet_unread - (OLD.read_at IS NULL AND OLD.news = 0)
    WHERE agent_pk = OLD.agent_pk;
END;

-- An agent's addresses (JSON array; NULL: its id and role) and watched tags (JSON array).
ALTER TABLE agents ADD COLUMN addresses TEXT;
ALTER TABLE agents ADD COLUMN watch TEXT NOT NULL DEFAULT '[]';

-- A team's open tasks, counted for its activity without walking finished ones.
CREATE INDEX tasks_open ON tasks (team_pk, assignee_pk)
    WHERE status = 'in-progress' OR status = 'input-required';

COMMIT;

PRAGMA foreign_keys = ON;
