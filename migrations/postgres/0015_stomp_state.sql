-- What a Wise Agents team needs from its broker to never go deaf (as SQLite's 0027).
ALTER TABLE teams ADD COLUMN stomp_default_context TEXT;
ALTER TABLE queue_cursors ADD COLUMN deaf BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE agents ADD COLUMN stomp_bridge BOOLEAN NOT NULL DEFAULT false;
UPDATE agents SET stomp_bridge = true WHERE role = 'wise-agent';
