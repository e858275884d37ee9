-- Full-text search over messages (as SQLite's 0033): the text and every string of
-- content.data as a generated column, kept in the message's own row (so in its
-- transaction, and gone with it), with a GIN index. 'simple': no stemming, as FTS5's
-- unicode61. Everything but letters and digits is cut to a space before PostgreSQL's
-- parser sees it (its parser reads "parser-42" as 'parser' and the number '-42'), so a
-- document is cut as every query is (`SearchTerms::parse`); the data's strings come as
-- a JSON array's text, whose escapes (\n, \", \u0001) are cut first.
ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
    to_tsvector('simple', regexp_replace(
        coalesce(content::jsonb ->> 'text', '') || ' ' ||
        regexp_replace(
            coalesce(jsonb_path_query_array(content::jsonb -> 'data',
                                            'strict $.** ? (@.type() == "string")'),
                     '[]'::jsonb)::text,
            '\\([nrtbf"\\/]|u[0-9a-fA-F]{4})', ' ', 'g'),
        '[^[:alnum:]]+', ' ', 'g'))
) STORED;
CREATE INDEX messages_search ON messages USING gin (search);
