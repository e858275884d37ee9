-- STOMP queues: where each of an agent's queues stands.
--
-- A Wise Agents process reads its inbox through two queues, /queue/request/<agent> and
-- /queue/response/<agent>, each on its own connection; each queue takes a subset of the
-- inbox (requests or responses), so each needs its own cursor: the agent's one
-- acked_seq would let one queue's progress skip the other's unread entries.
--
-- acked_seq: the highest inbox seq of that queue the agent consumed (ack `auto`: sent;
-- `client` modes: acknowledged). Kept in memory and written once a second with the
-- WebSocket cursors, so after a crash a few entries may come again (at-least-once).
CREATE TABLE queue_cursors (
    agent_pk  INTEGER NOT NULL REFERENCES agents (pk),
    queue     TEXT    NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_pk, queue)
) WITHOUT ROWID;

-- A team bridge registers an agent it does not know on its first subscription (Wise
-- Agents agents are named by their queues); a team can switch that off.
ALTER TABLE teams ADD COLUMN stomp_auto_register INTEGER NOT NULL DEFAULT 1;
