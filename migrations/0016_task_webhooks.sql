-- Further receivers of a task's changes, set by the task's originator through a
-- transport (A2A's push notification configs). Each is an HTTP endpoint with the headers
-- it wants (a token, an Authorization value) and the format its bodies are rendered in;
-- the body is rendered when it is sent, by the transport that owns the format.
CREATE TABLE task_webhooks (
    pk               INTEGER PRIMARY KEY,
    task_pk          INTEGER NOT NULL REFERENCES tasks (pk),
    team_pk          INTEGER NOT NULL REFERENCES teams (pk),
    -- the id the originator gave it (unique per task)
    webhook_id       TEXT NOT NULL,
    -- who renders the bodies ('a2a')
    format           TEXT NOT NULL,
    url              TEXT NOT NULL,
    -- sent as X-A2A-Notification-Token
    token            TEXT,
    -- sent as `Authorization: <scheme> <credentials>`; never shown back
    auth_scheme      TEXT,
    auth_credentials TEXT,
    created_at       INTEGER NOT NULL,
    UNIQUE (task_pk, webhook_id)
) STRICT;

-- The webhook an outbox row is for (NULL: the task's own callback_url). Such rows keep
-- `body` empty: it is rendered when the row is sent.
ALTER TABLE callbacks ADD COLUMN webhook_pk INTEGER;

-- Every history entry of a task is queued to each of its webhooks in the transaction
-- that wrote the entry, whichever statement wrote it: nothing committed goes unpushed.
CREATE TRIGGER task_events_to_webhooks AFTER INSERT ON task_events
BEGIN
    INSERT INTO callbacks (task_pk, team_pk, url, event_seq, body, state, attempts,
                           next_attempt_at, created_at, webhook_pk)
    SELECT w.task_pk, w.team_pk, w.url, NEW.seq, '', 'pending', 0, NEW.created_at,
           NEW.created_at, w.pk
    FROM task_webhooks w WHERE w.task_pk = NEW.task_pk;
END;
