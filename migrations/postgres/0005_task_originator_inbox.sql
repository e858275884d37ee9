-- As SQLite's 0020: whether a task's notifications for its originator go to the
-- originator's inbox (false for tasks created over A2A, which the caller follows there).
ALTER TABLE tasks ADD COLUMN originator_inbox BOOLEAN NOT NULL DEFAULT TRUE;
