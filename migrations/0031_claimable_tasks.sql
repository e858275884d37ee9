-- no-transaction
--
-- Claimable work (issue 65): a task may be offered to a role (`assignee_role`) and wait,
-- `open`, until an agent of that role claims it; a claim holds for `lease_seconds`
-- without progress (`lease_expires_at`), after which the task is open again, counting
-- its `attempts` against the team's `max_attempts`.
--
-- The table is rebuilt (SQLite cannot change a CHECK constraint in place) with foreign
-- key enforcement off, as in 0021; its indexes and row-count triggers are made again.

PRAGMA foreign_keys = OFF;

BEGIN IMMEDIATE;

CREATE TABLE tasks_rebuilt (
    pk                    INTEGER PRIMARY KEY,
    team_pk               INTEGER NOT NULL REFERENCES teams (pk),
    -- client-supplied or generated; unique among the originator's tasks
    task_id               TEXT NOT NULL,
    description           TEXT NOT NULL,
    -- JSON object
    data                  TEXT NOT NULL,
    originator_pk         INTEGER NOT NULL REFERENCES agents (pk),
    -- NULL when nobody suitable was found (the task failed at submission), and while
    -- the task is open
    assignee_pk           INTEGER REFERENCES agents (pk),
    -- an http(s) URL or a member's agent id
    callback_url          TEXT,
    priority              TEXT NOT NULL
        CHECK (priority = 'low' OR priority = 'normal' OR priority = 'high'
               OR priority = 'urgent'),
    -- JSON array of strings
    required_capabilities TEXT NOT NULL,
    target_agent_id       TEXT,
    status                TEXT NOT NULL
        CHECK (status = 'open' OR status = 'in-progress' OR status = 'input-required'
               OR status = 'success' OR status = 'failed' OR status = 'canceled'),
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
    -- whether notifications for the originator go to its inbox (0020)
    originator_inbox      INTEGER NOT NULL DEFAULT 1
        CHECK (originator_inbox = 0 OR originator_inbox = 1),
    -- the causal chain it extends (0023), its trace (0024), its history's data (0028)
    chain                 TEXT,
    trace_id              TEXT,
    trace                 TEXT,
    history_bytes         INTEGER NOT NULL DEFAULT 0,
    -- the role it is offered to (NULL: given to an agent), its claims so far, and the
    -- current claim's lease: its length and, while in progress, its end
    assignee_role         TEXT,
    attempts              INTEGER NOT NULL DEFAULT 0,
    lease_seconds         INTEGER,
    lease_expires_at      INTEGER,
    UNIQUE (team_pk, task_id, originator_pk)
) STRICT;

INSERT INTO tasks_rebuilt
    (pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
     priority, required_capabilities, target_agent_id, status, clarification_id, question,
     context, result_data, callback_delivery, version, created_at, updated_at,
     originator_inbox, chain, trace_id, trace, history_bytes)
SELECT pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
     priority, required_capabilities, target_agent_id, status, clarification_id, question,
     context, result_data, callback_delivery, version, created_at, updated_at,
     originator_inbox, chain, trace_id, trace, history_bytes
FROM tasks;

DROP TABLE tasks;

ALTER TABLE tasks_rebuilt RENAME TO tasks;

-- As before.
CREATE INDEX tasks_by_originator ON tasks (originator_pk, pk);
CREATE INDEX tasks_finished ON tasks (team_pk, updated_at)
    WHERE status IN ('success', 'failed', 'canceled');
CREATE INDEX tasks_open ON tasks (team_pk, assignee_pk)
    WHERE status = 'in-progress' OR status = 'input-required';
CREATE INDEX tasks_by_team ON tasks (team_pk, pk);
CREATE INDEX tasks_by_trace ON tasks (team_pk, trace_id) WHERE trace_id IS NOT NULL;
-- New: a claim reads a role's open tasks by priority, then age; the sweep finds the
-- claims whose lease ran out.
CREATE INDEX tasks_offered ON tasks (team_pk, assignee_role, priority, pk)
    WHERE status = 'open';
CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

CREATE TRIGGER row_counts_tasks_insert AFTER INSERT ON tasks
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'tasks';
END;

CREATE TRIGGER row_counts_tasks_delete AFTER DELETE ON tasks
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'tasks';
END;

-- How many claims a task offered to the team's roles gets.
ALTER TABLE teams ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 3;

COMMIT;

PRAGMA foreign_keys = ON;
