-- The trigger that queues a task event for the task's push-notification webhooks now
-- runs its body only when the task has one. The body is an `INSERT … SELECT` into
-- `callbacks`, a table with triggers, which SQLite runs through a temporary table that
-- it opens and drops every time the statement runs, even when it selects no row; every
-- task event paid for it, and almost no task has a webhook. What it writes is
-- unchanged.

DROP TRIGGER task_events_to_webhooks;

CREATE TRIGGER task_events_to_webhooks AFTER INSERT ON task_events
WHEN EXISTS (SELECT 1 FROM task_webhooks WHERE task_pk = NEW.task_pk)
BEGIN
    INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                           next_attempt_at, created_at, webhook_pk)
    SELECT w.task_pk, w.team_pk, w.url, NEW.seq, '', 'pending', 0, NEW.created_at,
           NEW.created_at, w.pk
    FROM task_webhooks w WHERE w.task_pk = NEW.task_pk;
END;
