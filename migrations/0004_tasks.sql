-- The task protocol: tasks as durable state with a history, and the callback outbox.
--
-- A task row holds the current state; every change bumps `version` and appends one row
-- to `task_events` with that version as its sequence number, in the same transaction,
-- so the history is complete and ordered. Writers update a task only if its version is
-- still the one they read (optimistic concurrency through the single writer).

CREATE TABLE tasks (
    pk                    INTEGER PRIMARY KEY,
    team_pk               INTEGER NOT NULL REFERENCES teams (pk),
    -- client-supplied or generated; unique within the team
    task_id               TEXT NOT NULL,
    description           TEXT NOT NULL,
    -- JSON object
    data                  TEXT NOT NULL,
    originator_pk         INTEGER NOT NULL REFERENCES agents (pk),
    -- NULL when nobody suitable was found (the task failed at submission)
    assignee_pk           INTEGER REFERENCES agents (pk),
    -- an http(s) URL or a member's agent id
    callback_url          TEXT,
    priority              TEXT NOT NULL CHECK (priority IN ('low', 'normal', 'high', 'urgent')),
    -- JSON array of strings
    required_capabilities TEXT NOT NULL,
    target_agent_id       TEXT,
    status                TEXT NOT NULL
        CHECK (status IN ('in-progress', 'input-required', 'success', 'failed', 'canceled')),
    -- the open ClarificationRequest while status = 'input-required'
    clarification_id      TEXT,
    question              TEXT,
    -- JSON array: clarification rounds answered so far, the task's added context
    context               TEXT NOT NULL,
    -- JSON: the last TaskResponse's result_data
    result_data           TEXT,
    -- JSON: what became of the last callback (URL callbacks only)
    callback_delivery     TEXT,
    version               INTEGER NOT NULL,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    UNIQUE (team_pk, task_id)
) STRICT;

-- "my tasks" listings, and open tasks per assignee (assignment balances on it).
CREATE INDEX tasks_by_originator ON tasks (originator_pk, pk);
CREATE INDEX tasks_by_assignee ON tasks (assignee_pk, status);

-- Every agent that was ever assigned a task may read it.
CREATE TABLE task_assignees (
    task_pk  INTEGER NOT NULL REFERENCES tasks (pk),
    agent_pk INTEGER NOT NULL REFERENCES agents (pk),
    PRIMARY KEY (agent_pk, task_pk)
) STRICT, WITHOUT ROWID;

CREATE TABLE task_events (
    task_pk    INTEGER NOT NULL REFERENCES tasks (pk),
    seq        INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    actor_pk   INTEGER REFERENCES agents (pk),
    status     TEXT NOT NULL,
    -- JSON object: what the event carried (question, answer, reason, result, …)
    data       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (task_pk, seq)
) STRICT, WITHOUT ROWID;

-- CallbackNotifications waiting to be POSTed. A row is written in the transaction that
-- changed the task, so a committed change always has its callback; the sender deletes
-- nothing: it records each attempt's outcome and the final one.
CREATE TABLE callbacks (
    pk              INTEGER PRIMARY KEY,
    task_pk         INTEGER NOT NULL REFERENCES tasks (pk),
    team_pk         INTEGER NOT NULL REFERENCES teams (pk),
    url             TEXT NOT NULL,
    -- the task event it reports (task_events.seq)
    event_seq       INTEGER NOT NULL,
    -- the exact JSON body that is signed and sent
    body            TEXT NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT,
    last_status     INTEGER,
    created_at      INTEGER NOT NULL,
    finished_at     INTEGER
) STRICT;

CREATE INDEX callbacks_pending ON callbacks (task_pk, pk) WHERE state = 'pending';

-- The key callbacks are signed with (HMAC-SHA256). Receivers need it to verify, so it is
-- stored as is (unlike tokens) and shown to the team key on request.
CREATE TABLE team_secrets (
    team_pk    INTEGER PRIMARY KEY REFERENCES teams (pk),
    secret     TEXT NOT NULL,
    rotated_at INTEGER NOT NULL
) STRICT;

-- SQLite's randomness comes from the operating system's generator.
INSERT INTO team_secrets (team_pk, secret, rotated_at)
    SELECT pk, 'whsec_' || lower(hex(randomblob(32))), created_at FROM teams;

CREATE TRIGGER team_secret_on_create AFTER INSERT ON teams
BEGIN
    INSERT INTO team_secrets (team_pk, secret, rotated_at)
        VALUES (new.pk, 'whsec_' || lower(hex(randomblob(32))), new.created_at);
END;
