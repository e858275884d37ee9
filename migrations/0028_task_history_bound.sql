-- history_bytes: the bytes of data a task's history entries hold, kept with each change
-- so the history's bound (docs/tasks.md) is checked without reading the history. Tasks
-- from before count from 0.
ALTER TABLE tasks ADD COLUMN history_bytes INTEGER NOT NULL DEFAULT 0;
