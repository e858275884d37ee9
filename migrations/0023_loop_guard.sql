-- The loop guard (issue 45). A team's settings as one JSON object (NULL: the defaults),
-- and on each message and task the causal chain it extends (JSON: length, first id and
-- the last few senders; NULL for a row that starts a chain), so a send is checked
-- against its parent row alone.
ALTER TABLE teams ADD COLUMN loop_guard TEXT;
ALTER TABLE messages ADD COLUMN chain TEXT;
ALTER TABLE tasks ADD COLUMN chain TEXT;
