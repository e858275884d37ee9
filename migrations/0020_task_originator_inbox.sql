-- Whether a task's notifications for its originator go to the originator's inbox. A task
-- created over A2A is followed over A2A (its answer, `GetTask`, `SubscribeToTask`, push
-- configs): a TaskResponse in the caller's inbox for each of its changes was never read
-- by an A2A client, only counted unread, and it cost a message and its inbox entries per
-- change. Those tasks are stored with 0; every other task, and every task before this
-- migration, with 1 (nothing about them changes).
ALTER TABLE tasks ADD COLUMN originator_inbox INTEGER NOT NULL DEFAULT 1
    CHECK (originator_inbox = 0 OR originator_inbox = 1);
