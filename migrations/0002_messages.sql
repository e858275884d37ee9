-- The messaging contract: messages stored once, one inbox entry per recipient.
--
-- A message (any kind: a plain message, a response, a broadcast, an assistance request,
-- a task notification) is one row in `messages`. Each recipient gets one row in `inbox`
-- with its own strictly increasing sequence number `seq` (per recipient: the cursor
-- that live push and replay use), its read flag, and copies of the columns the inbox
-- filters on, so that filtering and counting an inbox never touches `messages`.

CREATE TABLE messages (
    pk                INTEGER PRIMARY KEY,
    message_id        TEXT NOT NULL UNIQUE,
    team_pk           INTEGER NOT NULL REFERENCES teams (pk),
    kind              TEXT NOT NULL
        CHECK (kind IN ('message', 'response', 'broadcast', 'assistance_request', 'task')),
    sender_pk         INTEGER NOT NULL REFERENCES agents (pk),
    -- the sender's role when it sent (roles change; history should not)
    sender_role       TEXT NOT NULL,
    message_type      TEXT NOT NULL
        CHECK (message_type IN ('information', 'request', 'response', 'coordination')),
    priority          TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
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

-- Team metrics count a team's messages. Deliberately not (team_pk, sender_pk): that
-- would scatter each commit's inserts over one index page per sender, and every dirty
-- page is a 4 KiB WAL write; (team_pk) alone grows at its end like the other indexes.
CREATE INDEX messages_by_team ON messages (team_pk);

CREATE TABLE inbox (
    agent_pk     INTEGER NOT NULL REFERENCES agents (pk),
    seq          INTEGER NOT NULL,
    message_pk   INTEGER NOT NULL REFERENCES messages (pk),
    -- copies of the message's filter columns
    sender_pk    INTEGER NOT NULL,
    kind         TEXT NOT NULL,
    message_type TEXT NOT NULL,
    priority     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    read_at      INTEGER,
    PRIMARY KEY (agent_pk, seq)
) STRICT, WITHOUT ROWID;

-- "is this agent a recipient of that message", mark-read, and metrics
CREATE UNIQUE INDEX inbox_by_message ON inbox (message_pk, agent_pk);

-- Who answered which message, and how: the original's record of its responses.
CREATE TABLE responses (
    original_pk  INTEGER NOT NULL REFERENCES messages (pk),
    response_pk  INTEGER NOT NULL REFERENCES messages (pk),
    responder_pk INTEGER NOT NULL REFERENCES agents (pk),
    status       TEXT NOT NULL CHECK (status IN ('completed', 'partial', 'unable', 'delegated')),
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (original_pk, response_pk)
) STRICT;

CREATE INDEX responses_by_responder ON responses (responder_pk);

-- The first answer to a request sent with an Idempotency-Key, per calling agent, so a
-- retry returns it instead of acting twice.
CREATE TABLE idempotency_keys (
    agent_pk     INTEGER NOT NULL REFERENCES agents (pk),
    key          TEXT NOT NULL,
    operation    TEXT NOT NULL,
    -- SHA-256 of the request, to refuse the same key reused for a different request
    request_hash BLOB NOT NULL,
    answer       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (agent_pk, key)
) STRICT;
