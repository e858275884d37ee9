-- The foreign keys of the two tables every message writes are dropped: a message row
-- checked its team and sender, and each inbox entry its agent and message, each check a
-- lookup that locks the referenced row (FOR KEY SHARE) — four per message with one
-- recipient. Without them the database's CPU per message fell from 75 to 53 µs and
-- SEND_MESSAGE rose from 49–51 % of SQLite's rate to 56–64 % (`cargo bench --bench load
-- -- postgres`). They guard against
-- nothing the server does: teams and agents are never deleted (a removed agent keeps its
-- row), a message's entries are written in the same statement as the message, and
-- retention deletes entries before their messages in one transaction. SQLite keeps its
-- foreign keys (there a check is an in-process lookup). The other tables keep theirs.
ALTER TABLE messages DROP CONSTRAINT messages_team_pk_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_sender_pk_fkey;
ALTER TABLE inbox DROP CONSTRAINT inbox_agent_pk_fkey;
ALTER TABLE inbox DROP CONSTRAINT inbox_message_pk_fkey;
