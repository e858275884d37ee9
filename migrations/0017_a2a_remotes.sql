-- Outside A2A agents registered into a team: each is an agent of the registry (its
-- skills are its capabilities) that the server itself acts for, forwarding the tasks
-- it is given to the agent's A2A interface.
CREATE TABLE a2a_remotes (
    agent_pk      INTEGER PRIMARY KEY REFERENCES agents (pk),
    team_pk       INTEGER NOT NULL REFERENCES teams (pk),
    -- where the card is fetched from (and refreshed)
    card_url      TEXT NOT NULL,
    -- the card's JSON-RPC 1.0 interface, where tasks go
    interface_url TEXT NOT NULL,
    -- sent as the Authorization header of every call, if set; never shown back
    authorization TEXT,
    -- the card as last fetched (JSON)
    card          TEXT NOT NULL,
    refreshed_at  INTEGER NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;
