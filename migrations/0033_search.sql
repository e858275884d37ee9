-- Full-text search over messages (issue 66): the text and the strings of content.data,
-- indexed in the message's own transaction by a trigger (every insert path, the batch
-- one included), removed with the message by another (retention). Contentless: the
-- text is already in `messages`; `contentless_delete` lets a row go by its rowid.
-- unicode61 folds case and diacritics; no stemming (PostgreSQL's 'simple' alike).
-- No team column: a token every message of a team carries made each search read a
-- doclist as long as the team's history, and each merge of the index rewrite it (measured:
-- `docs/benchmarks.md`, scenario `search`); the team is checked on the message row.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2'
);
-- The data's strings are walked (json_tree, a virtual table: a cursor opened and closed
-- per message) only when there is data: most messages have none.
CREATE TRIGGER messages_fts_add AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, body) VALUES (new.pk,
        coalesce(json_extract(new.content, '$.text'), '') || char(10) ||
        CASE WHEN coalesce(json_extract(new.content, '$.data'), '{}') IN ('{}', '[]') THEN ''
             ELSE coalesce((SELECT group_concat(value, char(10))
                            FROM json_tree(new.content, '$.data') WHERE type = 'text'), '')
        END);
END;
-- Segments merge sixteen at a time instead of four: a message's entries are rewritten
-- about half as often on the way to the big segments (each commit writes a segment of
-- what it added), at the price of more segments for a search to read.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('automerge', 16);
CREATE TRIGGER messages_fts_drop AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.pk;
END;
INSERT INTO messages_fts (rowid, body)
SELECT pk, coalesce(json_extract(content, '$.text'), '') || char(10) ||
           coalesce((SELECT group_concat(value, char(10)) FROM json_tree(messages.content, '$.data')
                     WHERE type = 'text'), '')
FROM messages;
