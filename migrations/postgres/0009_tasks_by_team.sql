-- The operator's task board (`GET /v1/teams/{team_id}/tasks`) pages a team's tasks
-- newest first: a walk of this index that stops after one page, not a sort of every task
-- the team ever had.
CREATE INDEX tasks_by_team ON tasks (team_pk, pk);

-- And its timeline (`GET /v1/teams/{team_id}/messages`) pages a team's messages by key:
-- the team index carries the key, as SQLite's does implicitly (it replaces the index on
-- `team_pk` alone, so a message costs no extra index write).
DROP INDEX messages_by_team;
CREATE INDEX messages_by_team ON messages (team_pk, pk);
