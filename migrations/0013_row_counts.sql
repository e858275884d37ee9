-- Rows per table family for `/metrics`, kept instead of counted: `COUNT(*)` every few
-- seconds walks the whole table, which at millions of tasks or idempotency records is
-- noticeable work on the reader it runs on. (The inbox, messages and responses are
-- already read from `inbox_counts`.)
--
-- Triggers keep them, in the statement that inserts or deletes, so a count and its rows
-- commit together. Nothing of ours uses `INSERT OR REPLACE` on these tables (its
-- implicit delete would not fire a trigger); a migration that rebuilds one of them must
-- recreate its two triggers.

CREATE TABLE row_counts (
    family TEXT PRIMARY KEY,
    n      INTEGER NOT NULL CHECK (n >= 0)
) STRICT, WITHOUT ROWID;

INSERT INTO row_counts (family, n)
SELECT 'tasks', COUNT(*) FROM tasks
UNION ALL SELECT 'task_events', COUNT(*) FROM task_events
UNION ALL SELECT 'callbacks', COUNT(*) FROM callbacks
UNION ALL SELECT 'idempotency_keys', COUNT(*) FROM idempotency_keys;

CREATE TRIGGER row_counts_tasks_insert AFTER INSERT ON tasks
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'tasks';
END;

CREATE TRIGGER row_counts_tasks_delete AFTER DELETE ON tasks
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'tasks';
END;

CREATE TRIGGER row_counts_task_events_insert AFTER INSERT ON task_events
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'task_events';
END;

CREATE TRIGGER row_counts_task_events_delete AFTER DELETE ON task_events
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'task_events';
END;

CREATE TRIGGER row_counts_callbacks_insert AFTER INSERT ON callbacks
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'callbacks';
END;

CREATE TRIGGER row_counts_callbacks_delete AFTER DELETE ON callbacks
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'callbacks';
END;

CREATE TRIGGER row_counts_idempotency_insert AFTER INSERT ON idempotency_keys
BEGIN
    UPDATE row_counts SET n = n + 1 WHERE family = 'idempotency_keys';
END;

CREATE TRIGGER row_counts_idempotency_delete AFTER DELETE ON idempotency_keys
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE family = 'idempotency_keys';
END;
