-- As SQLite's 0021: a task id is unique among its originator's tasks, kept by one index
-- in the order tasks are looked up by, (team, id, originator), instead of a unique index
-- keyed by originator first beside a second one on (team, id). One index fewer per task
-- written, and generated (time-ordered) ids land at its right edge.
ALTER TABLE tasks DROP CONSTRAINT tasks_team_pk_originator_pk_task_id_key;
ALTER TABLE tasks ADD CONSTRAINT tasks_team_pk_task_id_originator_pk_key
    UNIQUE (team_pk, task_id, originator_pk);
DROP INDEX tasks_by_id;
-- And, as there, `tasks_by_assignee` goes: the open tasks per assignee are counted from
-- `tasks_open`, which holds only open tasks.
DROP INDEX tasks_by_assignee;
