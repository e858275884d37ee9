-- Which agents have live connections on which node, so that `delivered_to`,
-- `pending_delivery` and presence are true across nodes. Each node rewrites its own rows
-- and its heartbeat every second; a node whose heartbeat is older than ten seconds is
-- taken for dead and its rows are ignored (and replaced when it comes back).

CREATE TABLE nodes (
    node_id      TEXT PRIMARY KEY,
    heartbeat_at BIGINT NOT NULL
);

CREATE TABLE node_connections (
    node_id  TEXT NOT NULL,
    agent_pk BIGINT NOT NULL REFERENCES agents (pk),
    -- the transports of its connections there: 'websocket', 'stomp' (comma-separated)
    routes   TEXT NOT NULL,
    -- when its oldest connection there opened
    since    BIGINT NOT NULL,
    PRIMARY KEY (node_id, agent_pk)
);
