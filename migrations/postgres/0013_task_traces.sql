-- Traces of tasks (issue 45): a task is a span, as a message is. One that joins a trace
-- (the request's traceparent, or its parent task's) stores the trace id (indexed, for
-- GET /v1/traces/{trace_id}) and, as JSON, its parent span and tracestate; one whose
-- ordered id names its own trace stores nothing.
ALTER TABLE tasks ADD COLUMN trace_id TEXT;
ALTER TABLE tasks ADD COLUMN trace TEXT;
CREATE INDEX tasks_by_trace ON tasks (team_pk, trace_id) WHERE trace_id IS NOT NULL;
