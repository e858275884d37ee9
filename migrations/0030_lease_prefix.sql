-- A lease's literal prefix (the leading segments of its resource without a `*`), so a
-- grant reads only the leases that may overlap it: those whose prefix encloses or
-- extends its own. Rows from before have '' — the prefix that encloses everything — so
-- they are read by every grant until they end, as before.
ALTER TABLE leases ADD COLUMN prefix TEXT NOT NULL DEFAULT '';
CREATE INDEX leases_by_prefix ON leases (team_pk, prefix);
CREATE INDEX leases_by_holder ON leases (holder_pk, expires_at);
