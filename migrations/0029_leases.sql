-- Leases on named resources (issue 65). A row is a lease granted and not yet released;
-- it is live while expires_at (microseconds) is ahead of now and its holder is a member.
-- Grants are decided inside the writer's transaction on the team's live rows, so two
-- overlapping exclusive leases are never both written.
CREATE TABLE leases (
    pk          INTEGER PRIMARY KEY,
    team_pk     INTEGER NOT NULL REFERENCES teams (pk) ON DELETE CASCADE,
    lease_id    TEXT NOT NULL UNIQUE,
    holder_pk   INTEGER NOT NULL REFERENCES agents (pk),
    resource    TEXT NOT NULL,
    exclusive   INTEGER NOT NULL CHECK (exclusive IN (0, 1)),
    reason      TEXT,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX leases_by_team ON leases (team_pk, expires_at);
-- The expiry sweep walks the ends, oldest first.
CREATE INDEX leases_by_expiry ON leases (expires_at);
