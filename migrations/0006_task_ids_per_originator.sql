-- no-transaction
--
-- A client-chosen task id is unique among the tasks of its originator, not of the
-- whole team. Unique in the team, it told an agent that a task it could not see
-- existed: its id was taken (`CONFLICT`), while reading it said `TASK_NOT_FOUND`. Now
-- two agents may each have a task "build"; a task is found by its id among the tasks
-- the caller may see (the one it originated first).
--
-- The CHECKs become comparisons, as 0005 did for `messages`: a constant IN list of more
-- than two values makes SQLite build a temporary index every time a statement runs,
-- and every task change runs one. The rules are unchanged.
--
-- The table is referenced by task_assignees, task_events and callbacks, so it is
-- rebuilt with foreign key enforcement off (see 0005).

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
    UNIQUE (team_pk, originator_pk, task_id)
) STRICT;

INSERT INTO tasks_rebuilt
    (pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
     priority, required_capabilities, target_agent_id, status, clarification_id, question,
     context, result_data, callback_delivery, version, created_at, updated_at)
SELECT pk, team_pk, task_id, description, data, originator_pk, assignee_pk, callback_url,
       priority, required_capabilities, target_agent_id, status, clarification_id, question,
       context, result_data, callback_delivery, version, created_at, updated_at
FROM tasks;

DROP TABLE tasks;

ALTER TABLE tasks_rebuilt RENAME TO tasks;

-- As in 0004: "my tasks" listings, and open tasks per assignee.
CREATE INDEX tasks_by_originator ON tasks (originator_pk, pk);
CREATE INDEX tasks_by_assignee ON tasks (assignee_pk, status);
-- A task by its id in a team (then filtered to those the caller may see).
CREATE INDEX tasks_by_id ON tasks (team_pk, task_id);

COMMIT;

PRAGMA foreign_keys = ON;
