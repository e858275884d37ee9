-- What serving from PostgreSQL needs of the schema at 0001: inbox numbering by the
-- database, and counters kept per statement.
--
-- Inbox entries are numbered by the database as they are inserted: a BEFORE INSERT
-- trigger takes the recipient's next seq from its counter row and counts the entry in
-- the same UPDATE. That UPDATE locks the row until the transaction ends, so a second
-- writer to the same recipient (another node) waits for the commit, or for the
-- rollback that hands the same numbers out again: seqs are gap-free and commit in
-- their order, and a reader replaying from a cursor never skips an entry that commits
-- later with a lower number. One UPDATE per entry instead of two (the numbering and
-- the count), and no writer can forget to number.
--
-- An entry inserted with seq 0 is numbered and counted here; `RETURNING seq` reports
-- the number taken. An entry inserted with its number is the writer's business: the
-- batch flush (store/postgres/staging.rs) locks the counter rows it needs in key order,
-- takes a whole batch's seqs and counts with one UPDATE per batch, and inserts the
-- entries numbered. `switchboard migrate-db` copies entries with their numbers,
-- triggers off, as before.

CREATE FUNCTION inbox_number() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inbox_counts
    SET last_seq = last_seq + 1,
        total = total + 1,
        unread = unread + (NEW.read_at IS NULL)::int,
        quiet_unread = quiet_unread + (NEW.read_at IS NULL AND NOT NEW.news)::int,
        quiet_total = quiet_total + (NOT NEW.news)::int
    WHERE agent_pk = NEW.agent_pk
    RETURNING last_seq INTO NEW.seq;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'agent % has no inbox counters', NEW.agent_pk
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER inbox_number BEFORE INSERT ON inbox
    FOR EACH ROW WHEN (NEW.seq = 0) EXECUTE FUNCTION inbox_number();

-- The insert is counted above now; deletes and read marks stay with the old function
-- (its INSERT branch is no longer reached).
DROP TRIGGER inbox_counts_inbox ON inbox;
CREATE TRIGGER inbox_counts_inbox AFTER DELETE OR UPDATE OF read_at ON inbox
    FOR EACH ROW EXECUTE FUNCTION inbox_counts_inbox();

-- Retention removes idempotency records oldest first; SQLite finds them by rowid, here
-- an index on their age does it.
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- The sent, responded and row counters are kept per statement, not per row: a batch
-- flush inserts hundreds of messages in one statement, and a PL/pgSQL call with an
-- UPDATE per row was most of its cost. Each statement's rows (its transition table)
-- are counted per agent (or family) and added with one UPDATE, in key order. A
-- trigger with a transition table has one event, hence a pair per table.
DROP TRIGGER inbox_counts_sent ON messages;
DROP TRIGGER inbox_counts_responded ON responses;
DROP TRIGGER row_counts_tasks ON tasks;
DROP TRIGGER row_counts_task_events ON task_events;
DROP TRIGGER row_counts_callbacks ON callbacks;
DROP TRIGGER row_counts_idempotency ON idempotency_keys;

CREATE FUNCTION inbox_counts_sent_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE inbox_counts c SET sent = c.sent + d.n
        FROM (SELECT sender_pk, COUNT(*) AS n FROM changed GROUP BY sender_pk
              ORDER BY sender_pk) d
        WHERE c.agent_pk = d.sender_pk;
    ELSE
        UPDATE inbox_counts c SET sent = c.sent - d.n
        FROM (SELECT sender_pk, COUNT(*) AS n FROM changed GROUP BY sender_pk
              ORDER BY sender_pk) d
        WHERE c.agent_pk = d.sender_pk;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_counts_sent_insert AFTER INSERT ON messages
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_sent_rows();
CREATE TRIGGER inbox_counts_sent_delete AFTER DELETE ON messages
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_sent_rows();

CREATE FUNCTION inbox_counts_responded_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE inbox_counts c SET responded = c.responded + d.n
        FROM (SELECT responder_pk, COUNT(*) AS n FROM changed GROUP BY responder_pk
              ORDER BY responder_pk) d
        WHERE c.agent_pk = d.responder_pk;
    ELSE
        UPDATE inbox_counts c SET responded = c.responded - d.n
        FROM (SELECT responder_pk, COUNT(*) AS n FROM changed GROUP BY responder_pk
              ORDER BY responder_pk) d
        WHERE c.agent_pk = d.responder_pk;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER inbox_counts_responded_insert AFTER INSERT ON responses
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_responded_rows();
CREATE TRIGGER inbox_counts_responded_delete AFTER DELETE ON responses
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_counts_responded_rows();

-- One function for every counted family; the family is the trigger's argument.
CREATE FUNCTION row_counts_keep_rows() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rows_changed BIGINT;
BEGIN
    SELECT COUNT(*) INTO rows_changed FROM changed;
    IF rows_changed > 0 THEN
        UPDATE row_counts
        SET n = row_counts.n
                + CASE WHEN TG_OP = 'INSERT' THEN rows_changed ELSE -rows_changed END
        WHERE family = TG_ARGV[0];
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER row_counts_tasks_insert AFTER INSERT ON tasks REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('tasks');
CREATE TRIGGER row_counts_tasks_delete AFTER DELETE ON tasks REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('tasks');
CREATE TRIGGER row_counts_task_events_insert AFTER INSERT ON task_events
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('task_events');
CREATE TRIGGER row_counts_task_events_delete AFTER DELETE ON task_events
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('task_events');
CREATE TRIGGER row_counts_callbacks_insert AFTER INSERT ON callbacks
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('callbacks');
CREATE TRIGGER row_counts_callbacks_delete AFTER DELETE ON callbacks
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('callbacks');
CREATE TRIGGER row_counts_idempotency_insert AFTER INSERT ON idempotency_keys
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('idempotency_keys');
CREATE TRIGGER row_counts_idempotency_delete AFTER DELETE ON idempotency_keys
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION row_counts_keep_rows('idempotency_keys');
