-- Inbox entries are numbered by the database as they are inserted: a BEFORE INSERT
-- trigger takes the recipient's next seq from its counter row and counts the entry in
-- the same UPDATE. That UPDATE locks the row until the transaction ends, so a second
-- writer to the same recipient (another node) waits for the commit, or for the
-- rollback that hands the same numbers out again: seqs are gap-free and commit in
-- their order, and a reader replaying from a cursor never skips an entry that commits
-- later with a lower number. One UPDATE per entry instead of two (the numbering and
-- the count), and no writer can forget to number.
--
-- The value an INSERT gives `seq` is ignored (give 0); `RETURNING seq` reports the
-- number taken. `switchboard migrate-db` copies entries with their numbers, triggers
-- off, as before.

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
    FOR EACH ROW EXECUTE FUNCTION inbox_number();

-- The insert is counted above now; deletes and read marks stay with the old function
-- (its INSERT branch is no longer reached).
DROP TRIGGER inbox_counts_inbox ON inbox;
CREATE TRIGGER inbox_counts_inbox AFTER DELETE OR UPDATE OF read_at ON inbox
    FOR EACH ROW EXECUTE FUNCTION inbox_counts_inbox();

-- Retention removes idempotency records oldest first; SQLite finds them by rowid, here
-- an index on their age does it.
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
