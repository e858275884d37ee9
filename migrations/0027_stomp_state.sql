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
