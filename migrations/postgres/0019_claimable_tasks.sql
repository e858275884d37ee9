-- Claimable work (as SQLite's 0031): a task offered to a role is `open` until an agent
-- of that role claims it; a claim holds for `lease_seconds` without progress.
ALTER TABLE tasks DROP CONSTRAINT tasks_status_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_status_check
    CHECK (status IN ('open', 'in-progress', 'input-required', 'success', 'failed',
                      'canceled'));
ALTER TABLE tasks ADD COLUMN assignee_role TEXT;
ALTER TABLE tasks ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN lease_seconds BIGINT;
ALTER TABLE tasks ADD COLUMN lease_expires_at BIGINT;
CREATE INDEX tasks_offered ON tasks (team_pk, assignee_role, priority, pk)
    WHERE status = 'open';
CREATE INDEX tasks_leased ON tasks (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
ALTER TABLE teams ADD COLUMN max_attempts BIGINT NOT NULL DEFAULT 3;
