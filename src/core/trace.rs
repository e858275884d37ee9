//! The trace context of the request being served (`docs/tracing.md`).
//!
//! A transport decodes `traceparent` and `tracestate` from wherever its protocol carries
//! them (an HTTP header, a WebSocket frame's fields, a STOMP header) and serves the
//! request inside [`traced`]; the core reads the context where it writes a message, so
//! no operation type needs a field for it and no transport can forget to pass it on.

use std::future::Future;

use switchboard_types::ErrorCode;
use switchboard_types::trace::{TraceContext, TraceHop, TraceTask, TraceView, is_trace_id};

use super::spans::random_trace_id;
use super::{Caller, Core, CoreError, CoreResult};
use crate::model::trace::{join, span_id};
use crate::model::{MessageRecord, MessageTrace, TaskRecord, TrafficRow};

tokio::task_local! {
    static CONTEXT: TraceContext;
}

/// Runs `serve` with the trace context its request came with.
pub async fn traced<F: Future>(context: TraceContext, serve: F) -> F::Output {
    CONTEXT.scope(context, serve).await
}

impl Core {
    /// The trace a message joins: the request's context, else the trace of the message
    /// it answers, else none (it starts its own).
    pub(super) fn trace_for(&self, answers: Option<&MessageRecord>) -> Option<MessageTrace> {
        let context = CONTEXT.try_with(Clone::clone).ok();
        join(
            context.as_ref(),
            answers.map(|m| (m.message_id.as_str(), m.trace.as_ref())),
        )
    }

    /// The trace a new task joins: the request's context, else its parent task's
    /// (`parent_task_id`), else none — the ordered id the server `generated` for it names
    /// its own. A task whose id the client chose gets a random trace id instead: its id
    /// may be anyone's (the same in every team that chose it, or another trace's digits).
    pub(super) fn task_trace(
        &self,
        generated: bool,
        parent: Option<&TaskRecord>,
    ) -> Option<MessageTrace> {
        let context = CONTEXT.try_with(Clone::clone).ok();
        join(
            context.as_ref(),
            parent.map(|p| (p.task_id.as_str(), p.trace.as_ref())),
        )
        .or_else(|| {
            (!generated).then(|| MessageTrace {
                trace_id: random_trace_id(),
                parent: None,
                state: None,
                unsampled: false,
            })
        })
    }
}

/// Most hops one answer shows.
const MOST_HOPS: usize = 1000;

impl Core {
    /// `GET /v1/traces/{trace_id}`: the team key sees every message and task of the
    /// trace in its team; an agent sees the ones it took part in — messages it sent or
    /// received, tasks it originated or was assigned (none: as for a trace that does not
    /// exist, `NOT_FOUND`). A trace id is anyone's to write in a `traceparent`: had an
    /// agent that took part in one hop seen them all, one message carrying another
    /// pair's trace id would have shown it who talked to whom there.
    pub(super) async fn get_trace(&self, caller: &Caller, trace_id: &str) -> CoreResult<TraceView> {
        let (team, me) = self.reader(caller)?;
        if !is_trace_id(trace_id) {
            return Err(CoreError::validation(
                "trace_id",
                "a trace id is 32 lowercase hex digits, not all zero",
            )
            .with("value", trace_id));
        }
        let limit = i64::try_from(MOST_HOPS + 1).unwrap_or(i64::MAX);
        let store = self.store();
        let (rows, tasks) = tokio::try_join!(
            store.trace_traffic(team.pk, trace_id.to_owned(), limit),
            store.trace_tasks(team.pk, trace_id.to_owned(), limit),
        )?;
        let (mut rows, mut tasks) = (rows, tasks);
        if let Some(me) = me.as_deref() {
            rows.retain(|r| r.message.sender_pk == me.pk || r.recipients.contains(&me.agent_id));
            tasks.retain(|t| t.originator_pk == me.pk || t.assignee_pk == Some(me.pk));
        }
        if rows.is_empty() && tasks.is_empty() {
            return Err(CoreError::new(
                ErrorCode::NotFound,
                format!("no trace {trace_id} that you took part in"),
            )
            .with("trace_id", trace_id));
        }
        let more = rows.len() > MOST_HOPS || tasks.len() > MOST_HOPS;
        Ok(TraceView {
            success: true,
            trace_id: trace_id.to_owned(),
            hops: rows
                .into_iter()
                .take(MOST_HOPS)
                .map(|row| self.hop(row))
                .collect(),
            tasks: tasks
                .iter()
                .take(MOST_HOPS)
                .map(|task| self.trace_task(task))
                .collect(),
            more,
        })
    }

    fn trace_task(&self, t: &TaskRecord) -> TraceTask {
        TraceTask {
            task_id: t.task_id.clone(),
            originating_agent_id: self.agent_name(t.originator_pk),
            assignee_agent_id: t.assignee_pk.map(|pk| self.agent_name(pk)),
            status: t.status,
            created_at: t.created_at,
            updated_at: t.updated_at,
            span_id: span_id(&t.task_id),
            parent_span_id: t.trace.as_ref().and_then(|trace| trace.parent.clone()),
        }
    }

    fn hop(&self, row: TrafficRow) -> TraceHop {
        let m = row.message;
        TraceHop {
            span_id: span_id(&m.message_id),
            parent_span_id: m.trace.and_then(|t| t.parent),
            sender_agent_id: self.agent_name(m.sender_pk),
            recipient_agent_ids: row.recipients,
            timestamp: m.created_at,
            kind: m.kind,
            via: m.via,
            thread_id: m.thread_id,
            in_reply_to: m.in_reply_to,
            message_id: m.message_id,
        }
    }
}
