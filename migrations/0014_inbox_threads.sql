-- A thread read from the inbox's own index.
--
-- Under a busy writer every read transaction starts with a cold page cache (SQLite
-- drops a reader's cache, and its memory map, whenever the database changed), so a
-- read costs what it touches. A thread page went from the thread's messages to this
-- agent's entry for each and back to the message: three random pages per message of
-- the thread, and its count as many again (3.8 ms a page for a thread of 100 in a hot
-- inbox, against 0.8 ms for a plain page). The thread id is now copied into the entry
-- like the other filter columns, and a partial index holds what a thread page and its
-- counts need, in page order: a count reads a few index pages, a page adds only the
-- messages it returns. Entries outside a thread are not in the index and cost nothing.

ALTER TABLE inbox ADD COLUMN thread_id TEXT;

UPDATE inbox
SET thread_id = (SELECT m.thread_id FROM messages m WHERE m.pk = inbox.message_pk)
WHERE message_pk IN (SELECT pk FROM messages WHERE thread_id IS NOT NULL);

-- The thread index on messages (0008) served the old path only.
DROP INDEX messages_by_thread;

CREATE INDEX inbox_by_thread ON inbox (agent_pk, thread_id, seq, message_pk, read_at, news)
WHERE thread_id IS NOT NULL;
