-- The bytes of data a task's history holds (as SQLite's 0028).
ALTER TABLE tasks ADD COLUMN history_bytes BIGINT NOT NULL DEFAULT 0;
