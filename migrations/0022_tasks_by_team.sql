-- The operator's task board (`GET /v1/teams/{team_id}/tasks`) pages a team's tasks
-- newest first: a walk of this index that stops after one page, not a sort of every task
-- the team ever had.
CREATE INDEX tasks_by_team ON tasks (team_pk, pk);
