-- A lease's literal prefix (as SQLite's 0030). "C" collation: the store reads the
-- prefixes that extend one as a byte range ('a/' <= p < 'a0'), which only byte order
-- keeps.
ALTER TABLE leases ADD COLUMN prefix TEXT COLLATE "C" NOT NULL DEFAULT '';
CREATE INDEX leases_by_prefix ON leases (team_pk, prefix);
CREATE INDEX leases_by_holder ON leases (holder_pk, expires_at);
