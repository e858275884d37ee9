-- Retention: how long a team keeps read messages, unread messages and finished tasks.
--
-- NULL follows the server's setting (`--retention-…`); a team may only shorten it: the
-- operator's flags are the most any team keeps (the disk is the operator's). Seconds.
ALTER TABLE teams ADD COLUMN retain_read_s INTEGER CHECK (retain_read_s > 0);
ALTER TABLE teams ADD COLUMN retain_unread_s INTEGER CHECK (retain_unread_s > 0);
ALTER TABLE teams ADD COLUMN retain_tasks_s INTEGER CHECK (retain_tasks_s > 0);

-- The retention pass removes a message with the record of its responses, both ways.
CREATE INDEX responses_by_response ON responses (response_pk);

-- Finished tasks of a team, oldest change first: what the retention pass walks.
CREATE INDEX tasks_finished ON tasks (team_pk, updated_at)
    WHERE status IN ('success', 'failed', 'canceled');
