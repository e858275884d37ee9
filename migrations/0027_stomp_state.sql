-- What a Wise Agents team needs from its broker to never go deaf.
--
-- stomp_default_context: the Wise Agents context (`_context_name`) a message that names
-- none (a REST broadcast, a publish, a task notice) is handed to the team's Wise agents
-- in. Wise Agents look the context up and crash their listener when it is missing, so
-- with NULL such messages stay in the inbox and are not handed to Wise agents at all.
ALTER TABLE teams ADD COLUMN stomp_default_context TEXT;

-- deaf: the agent lost its subscription to this queue without unsubscribing (a Wise
-- Agents process never subscribes again until restarted). Kept so a server restart
-- still shows which processes are deaf.
ALTER TABLE queue_cursors ADD COLUMN deaf INTEGER NOT NULL DEFAULT 0;

-- stomp_bridge: the team's STOMP bridge (the team key, as a Wise Agents deployment
-- connects) may act for this agent. Agents a bridge registered itself (role
-- wise-agent) have it; an agent registered with a token of its own does not, unless it
-- was registered with it, and the team key can no longer consume its queues or send as
-- it.
ALTER TABLE agents ADD COLUMN stomp_bridge INTEGER NOT NULL DEFAULT 0;
UPDATE agents SET stomp_bridge = 1 WHERE role = 'wise-agent';
