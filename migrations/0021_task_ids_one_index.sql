-- no-transaction
--
-- Two indexes fewer for every task written (and for every change of its status):
--
-- * A task id is unique among its originator's tasks (0006) — the same rule, now kept by
--   one index in the order tasks are looked up by: (team, id, originator) instead of
--   (team, originator, id) beside a second index on (team, id). Ordered by id, generated
--   (time-ordered) ids land at its right edge; keyed by originator first, a batch of
--   tasks from many originators wrote a leaf page per originator into the WAL.
-- * `tasks_by_assignee` (assignee, status) goes: what read it, the open tasks per
--   assignee counted at start-up, reads `tasks_open`, which holds only open tasks; the
--   tasks an agent was given are listed through `task_assignees`.
--
-- The table is rebuilt (SQLite cannot change a UNIQUE constraint in place) with foreign
-- key enforcement off, as in 0006; its indexes and its row-count triggers (0013) are
-- made again. Nothing else changes.

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
    -- NULL when nobody suitable was found (the task failed at submission)
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
        CHECK (status = 'in-progress' OR status = 'input-required' OR status = 'success'
               OR status = 'failed' OR status = 'canceled'),
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
    UNIQUE (team_pk, task_id, originator_pk)
) STRICT;

INSERT INTO tasks_rebuilt
    (pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
     priority, required_capabilities, target_agent_id, status, clarification_id, question,
     context, result_data, callback_delivery, version, created_at, updated_at,
     originator_inbox)
SELECT pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
     priority, required_capabilities, target_agent_id, status, clarification_id, question,
     context, result_data, callback_delivery, version, created_at, updated_at,
     originator_inbox
FROM tasks;

DROP TABLE tasks;

ALTER TABLE tasks_rebuilt RENAME TO tasks;

-- As before: "my tasks" listings, what retention walks, a team's (and each assignee's)
-- open tasks.
CREATE INDEX tasks_by_originator ON tasks (originator_pk, pk);
CREATE INDEX tasks_finished ON tasks (team_pk, updated_at)
    WHERE status IN ('success', 'failed', 'canceled');
CREATE INDEX tasks_open ON tasks (team_pk, assignee_pk)
    WHERE status = 'in-progress' OR status = 'input-required';

CREATE TRIGGER row_counts_tasks_insert AFTER INSERT ON tasks
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'tasks';
END;

CREATE TRIGGER row_counts_tasks_delete AFTER DELETE ON tasks
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'tasks';
END;

COMMIT;

PRAGMA foreign_keys = ON;
