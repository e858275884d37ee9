//! The trace context of the request being served (`docs/tracing.md`).
//!
//! A transport decodes `traceparent` and `tracestate` from wherever its protocol carries
//! them (an HTTP header, a WebSocket frame's fields, a STOMP header) and serves the
//! request inside [`traced`]; the core reads the context where it writes a message, so
//! no operation type needs a field for it and no transport can forget to pass it on.

use std::future::Future;

use switchboard_types::ErrorCode;
use switchboard_types::trace::{TraceContext, TraceHop, TraceView, is_trace_id};

use super::{Caller, Core, CoreError, CoreResult};
use crate::model::trace::{join, span_id};
use crate::model::{AgentRecord, MessageRecord, MessageTrace, TrafficRow};

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
}

/// Most hops one answer shows.
const MOST_HOPS: usize = 1000;

impl Core {
    /// `GET /v1/traces/{trace_id}`: the team key sees every message of the trace in its
    /// team; an agent sees them when it sent or received one of them (otherwise, as for
    /// a trace that does not exist, `NOT_FOUND`).
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
        let mut rows = self
            .store()
            .trace_traffic(team.pk, trace_id.to_owned(), limit)
            .await?;
        let party = |me: &AgentRecord| {
            rows.iter()
                .any(|r| r.message.sender_pk == me.pk || r.recipients.contains(&me.agent_id))
        };
        if rows.is_empty() || me.as_deref().is_some_and(|me| !party(me)) {
            return Err(CoreError::new(
                ErrorCode::NotFound,
                format!("no trace {trace_id} that you sent or received a message of"),
            )
            .with("trace_id", trace_id));
        }
        let more = rows.len() > MOST_HOPS;
        rows.truncate(MOST_HOPS);
        let hops = rows.into_iter().map(|row| self.hop(row)).collect();
        Ok(TraceView {
            success: true,
            trace_id: trace_id.to_owned(),
            hops,
            more,
        })
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
