-- no-transaction
--
-- The same `messages` table, its CHECK constraints written as comparisons instead of
-- `IN (…)` lists. SQLite evaluates a constant IN list of more than two values through a
-- temporary index that it builds anew every time a statement runs; the writer inserts
-- each batch of messages with one statement, so three such indexes were built per
-- commit and probed per row, on the thread every write waits for. Comparisons cost
-- neither. The rules are unchanged.
--
-- Rebuilding a table that other tables reference needs foreign key enforcement off
-- (https://www.sqlite.org/lang_altertable.html#otheralter), which cannot change inside
-- a transaction: hence no-transaction here and an explicit one below.

PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

CREATE TABLE messages_rebuilt (
    pk                INTEGER PRIMARY KEY,
    message_id        TEXT NOT NULL UNIQUE,
    team_pk           INTEGER NOT NULL REFERENCES teams (pk),
    kind              TEXT NOT NULL
        CHECK (kind = 'message' OR kind = 'response' OR kind = 'broadcast'
               OR kind = 'assistance_request' OR kind = 'task'),
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
    created_at        INTEGER NOT NULL
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

-- As in 0002: (team_pk) alone, so that it grows at its end.
CREATE INDEX messages_by_team ON messages (team_pk);

COMMIT;

PRAGMA foreign_keys = ON;
