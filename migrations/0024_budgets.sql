-- Budgets (issue 45). A team's own budgets as one JSON object (NULL: the server's
-- ceilings), and the counts spent per fixed window: one row per budget key (which
-- budget, and the agent or thread it counts for) and window start (epoch seconds). A
-- count is written in the transaction of the send it counts, so a refused or rolled
-- back send spends nothing, and every node spends from the same row.
ALTER TABLE teams ADD COLUMN budgets TEXT;
CREATE TABLE budget_counts (
    team_pk INTEGER NOT NULL REFERENCES teams (pk) ON DELETE CASCADE,
    key TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    used INTEGER NOT NULL,
    PRIMARY KEY (team_pk, key, window_start)
);
-- Spent windows are removed by the retention sweep, oldest first.
CREATE INDEX budget_counts_by_window ON budget_counts (window_start);
