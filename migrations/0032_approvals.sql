-- Approval checkpoints (issue 66): an agent asks, a person decides. A row is written
-- pending; a decision or an expiry changes it once, guarded by `status = 'pending'`, so
-- an approval is never decided twice, on any node. `task_pk` has no foreign key: the
-- task's retention may remove the task before the approval's record goes.
CREATE TABLE approvals (
    pk           INTEGER PRIMARY KEY,
    team_pk      INTEGER NOT NULL REFERENCES teams (pk) ON DELETE CASCADE,
    approval_id  TEXT NOT NULL UNIQUE,
    asker_pk     INTEGER NOT NULL REFERENCES agents (pk),
    task_pk      INTEGER,
    task_id      TEXT,
    summary      TEXT NOT NULL,
    details      TEXT,
    options      TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'decided', 'expired')),
    decision     TEXT,
    comment      TEXT,
    decider_pk   INTEGER,
    decided_with TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    decided_at   INTEGER
) STRICT;
-- The team's list, newest first (by status too: the console's queue is the pending ones).
CREATE INDEX approvals_by_team ON approvals (team_pk, status, pk);
-- An asker's own, newest first, and its pending count.
CREATE INDEX approvals_by_asker ON approvals (asker_pk, status, pk);
CREATE INDEX approvals_by_task ON approvals (task_pk) WHERE task_pk IS NOT NULL;
-- The expiry sweep walks only what is pending.
CREATE INDEX approvals_pending ON approvals (expires_at) WHERE status = 'pending';
-- The agents (by id) that may decide the team's approvals besides the team key.
ALTER TABLE teams ADD COLUMN approvers TEXT NOT NULL DEFAULT '[]';
