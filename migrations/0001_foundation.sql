-- Foundation: server settings, teams and agents (the registry).
--
-- Conventions for every table in this database:
-- * timestamps are INTEGER microseconds since the Unix epoch, UTC (sortable, compact,
--   converted to RFC 3339 at the edge);
-- * `pk` columns are internal surrogate keys; the ids clients see are the TEXT columns;
-- * secrets are never stored, only SHA-256 digests of them (tokens carry 256 random bits,
--   so a fast hash is enough; there is nothing to brute-force).
-- Applied migrations are never edited: add a new file instead.

-- Key/value settings of this server (e.g. the digest of the admin token).
CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value BLOB NOT NULL
) STRICT;

CREATE TABLE teams (
    pk                    INTEGER PRIMARY KEY,
    team_id               TEXT NOT NULL UNIQUE,
    name                  TEXT NOT NULL,
    -- the team key is `sb_team_<key_id>_<secret>`; key_id finds the row, key_hash checks it
    key_id                TEXT NOT NULL UNIQUE,
    key_hash              BLOB NOT NULL,
    communication_enabled INTEGER NOT NULL DEFAULT 1 CHECK (communication_enabled IN (0, 1)),
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
) STRICT;

CREATE TABLE agents (
    pk                    INTEGER PRIMARY KEY,
    team_pk               INTEGER NOT NULL REFERENCES teams (pk),
    agent_id              TEXT NOT NULL,
    role                  TEXT NOT NULL,
    -- JSON array of strings, as registered (matching is case-insensitive, done in memory)
    capabilities          TEXT NOT NULL,
    address               TEXT,
    status                TEXT NOT NULL CHECK (status IN ('available', 'busy', 'unavailable')),
    communication_enabled INTEGER NOT NULL DEFAULT 1 CHECK (communication_enabled IN (0, 1)),
    -- NULL once the agent is removed: a removed agent has no working token
    token_id              TEXT UNIQUE,
    token_hash            BLOB,
    registered_at         INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL,
    -- removal keeps the row so that messages it sent or received keep their sender/recipient
    removed_at            INTEGER,
    UNIQUE (team_pk, agent_id)
) STRICT;
