-- Traces (issue 45). A message that joins a trace it did not start stores the trace id
-- (indexed, for GET /v1/traces/{trace_id}) and, as JSON, its parent span and the
-- tracestate it came with; one that starts its own stores nothing (its id names both).
ALTER TABLE messages ADD COLUMN trace_id TEXT;
ALTER TABLE messages ADD COLUMN trace TEXT;
CREATE INDEX messages_by_trace ON messages (team_pk, trace_id) WHERE trace_id IS NOT NULL;
