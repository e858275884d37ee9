//! The one path every sending operation takes (SEND_MESSAGE, RESPOND_TO_MESSAGE,
//! BROADCAST_UPDATE, REQUEST_ASSISTANCE, task notifications): check the sender, resolve
//! recipients, honour an idempotency key, write the message and its inbox entries in one
//! job of the group commit, and tell who got it.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;
use switchboard_types::ids::{AgentId, MessageId};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use switchboard_types::frames::push_body;
use switchboard_types::messages::{DeliveryStatus, MessageView};
use switchboard_types::routing::{Route, Via};
use switchboard_types::time::Timestamp;
use switchboard_types::validate::check_idempotency_key;
use switchboard_types::{ErrorCode, MessageOpName, OperationName};

use super::spans::{self, PendingSpan};
use super::{Caller, Core, CoreError, CoreResult};
use crate::hub::{Event, Hub, Push, Reservation};
use crate::model::{
    AgentRecord, Decided, IdempotencyClaim, MessageRecord, NewMessage, NewPost, PostContext,
    PostOutcome, PostResult, ResponseLink, StoredAnswer, TeamRecord,
};

/// An `Idempotency-Key` with the request it was sent with.
pub(super) struct Idempotency {
    key: String,
    operation: &'static str,
    hash: [u8; 32],
}

impl Idempotency {
    /// `None` without a key; validates the key's shape otherwise.
    fn new(
        key: Option<&str>,
        operation: MessageOpName,
        request: &impl Serialize,
    ) -> CoreResult<Option<Idempotency>> {
        let Some(key) = key else { return Ok(None) };
        check_idempotency_key(key)?;
        let body = serde_json::to_vec(request)
            .map_err(|e| CoreError::internal(format!("hashing the request: {e}")))?;
        Ok(Some(Idempotency {
            key: key.to_owned(),
            operation: OperationName::Messages(operation).as_str(),
            hash: Sha256::digest(&body).into(),
        }))
    }

    /// The stored first answer, if this key was used before for the same request.
    fn accept<T: DeserializeOwned>(&self, stored: StoredAnswer) -> CoreResult<T> {
        if stored.operation != self.operation || stored.request_hash != self.hash {
            return Err(CoreError::new(
                ErrorCode::Conflict,
                "this Idempotency-Key was already used for a different request",
            )
            .with("idempotency_key", self.key.as_str())
            .suggest(
                "Use a new key for a new request; reuse a key only to retry the same request.",
            ));
        }
        serde_json::from_str(&stored.answer)
            .map_err(|e| CoreError::internal(format!("a stored answer could not be read: {e}")))
    }

    fn claim(&self, agent: &AgentRecord) -> IdempotencyClaim {
        IdempotencyClaim {
            agent: agent.pk,
            key: self.key.clone(),
            operation: self.operation,
            request_hash: self.hash,
        }
    }
}

impl<'a, R: Serialize> SendRequest<'a, R> {
    /// A request whose body may leave its author out (publish).
    pub fn new(operation: MessageOpName, idempotency_key: Option<&'a str>, request: &'a R) -> Self {
        SendRequest {
            operation,
            idempotency_key,
            request,
            claimed: None,
        }
    }

    /// The body names its author in `field`: it must be the caller.
    pub fn claimed(mut self, claimed: &'a AgentId, field: &'static str) -> Self {
        self.claimed = Some((claimed, field));
        self
    }
}

/// A sending operation past its preamble: who sends, in which team, and the key its
/// answer will be kept under.
pub(super) struct Sending {
    pub team: Arc<TeamRecord>,
    pub sender: Arc<AgentRecord>,
    pub idem: Option<Idempotency>,
}

/// What a sending operation's request says of itself, for the preamble.
pub(super) struct SendRequest<'a, R: Serialize> {
    operation: MessageOpName,
    idempotency_key: Option<&'a str>,
    /// What the key's answer is bound to (a retry with another request is `CONFLICT`).
    request: &'a R,
    /// The agent the body names as its author, and the field naming it; must be the
    /// caller. `None` when the body may leave it out (publish).
    claimed: Option<(&'a AgentId, &'static str)>,
}

/// A message with where it goes.
pub(super) struct Outgoing {
    pub message: NewMessage,
    /// Resolved recipients (members; those with communication disabled fail).
    pub recipients: Vec<Arc<AgentRecord>>,
    /// Set when the message answers another.
    pub response: Option<ResponseLink>,
    /// Whether it counts against the team's budgets (an agent's own send; not a notice
    /// the server sends on an agent's behalf).
    pub spends_budget: bool,
}

/// What an operation needs to know to answer, before the message is written.
#[derive(Debug, Clone)]
pub(super) struct Posted {
    pub message_id: MessageId,
    pub timestamp: Timestamp,
    pub delivery: DeliveryStatus,
}

impl Core {
    /// The preamble of every sending operation, once: the key's shape, the caller as
    /// the sender the body names, a retry answered with the first answer
    /// (`ControlFlow::Break`), then the communication switches and the rate limit.
    pub(super) async fn start_sending<T: DeserializeOwned>(
        &self,
        caller: &Caller,
        request: SendRequest<'_, impl Serialize>,
    ) -> CoreResult<ControlFlow<T, Sending>> {
        let idem = Idempotency::new(request.idempotency_key, request.operation, request.request)?;
        let (team, sender) = match request.claimed {
            Some((claimed, field)) => self.sender(caller, claimed, field)?,
            None => self.identity().acting_agent(caller)?,
        };
        if let Some(answer) = self.replay(&sender, &idem).await? {
            return Ok(ControlFlow::Break(answer));
        }
        self.check_can_send(&team, &sender)?;
        Ok(ControlFlow::Continue(Sending { team, sender, idem }))
    }

    /// The calling agent, which the body names in `field`; naming anyone else is
    /// `FORBIDDEN` (the token decides who calls).
    pub(super) fn sender(
        &self,
        caller: &Caller,
        claimed: &AgentId,
        field: &str,
    ) -> CoreResult<(Arc<TeamRecord>, Arc<AgentRecord>)> {
        let (team, me) = self.identity().acting_agent(caller)?;
        if *claimed != *me.agent_id {
            return Err(CoreError::forbidden(format!(
                "{field} is '{claimed}' but the token belongs to '{}'",
                me.agent_id
            ))
            .with("field", field));
        }
        Ok((team, me))
    }

    /// An agent id a frame names as its author (`agent_id`, `requested_by`, …): when
    /// given, it must be the caller (`FORBIDDEN` otherwise), as in REST bodies.
    pub(super) fn check_claimed(
        &self,
        caller: &Caller,
        claimed: Option<&AgentId>,
        field: &str,
    ) -> CoreResult<()> {
        match claimed {
            Some(claimed) => self.sender(caller, claimed, field).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Communication switches and the rate limit, checked before anything is sent.
    pub(super) fn check_can_send(&self, team: &TeamRecord, sender: &AgentRecord) -> CoreResult<()> {
        if !team.communication_enabled {
            return Err(CoreError::communication_disabled(format!(
                "communication is disabled for team '{}'",
                team.team_id
            ))
            .with("team_id", team.team_id.as_str()));
        }
        if !sender.communication_enabled {
            return Err(CoreError::communication_disabled(format!(
                "communication is disabled for agent '{}'",
                sender.agent_id
            ))
            .with("agent_id", sender.agent_id.as_str()));
        }
        self.rate_limit(sender.pk)
    }

    /// The route of a message (AEA's precedence, adapted): an explicit route wins; a
    /// reply addressed only to its original's sender goes back by the transport the
    /// original came by, while that sender is live there (otherwise it would wait for a
    /// connection that may never come back, so it goes to every live one); anything
    /// else goes to every live connection (`None`).
    pub(super) fn route_for(
        &self,
        explicit: Option<Route>,
        original: Option<&MessageRecord>,
        recipients: &[Arc<AgentRecord>],
    ) -> Option<Route> {
        if explicit.is_some() {
            return explicit;
        }
        let original = original?;
        let [only] = recipients else { return None };
        if only.pk != original.sender_pk {
            return None;
        }
        original
            .via
            .and_then(Via::route)
            .filter(|route| self.hub().is_connected_by(only.pk, *route))
    }

    /// Every member of the team but `sender`.
    pub(super) fn others(&self, team: &TeamRecord, sender: &AgentRecord) -> Vec<Arc<AgentRecord>> {
        self.registry()
            .members(team.pk)
            .into_iter()
            .filter(|a| a.pk != sender.pk)
            .collect()
    }

    /// Explicit recipient ids → members. Duplicates collapse; the sender and anything
    /// that is not a current member of the team is `INVALID_RECIPIENT`, all listed in
    /// `details.invalid_ids`.
    pub(super) fn resolve_recipients(
        &self,
        team: &TeamRecord,
        sender: &AgentRecord,
        ids: &[AgentId],
        field: &str,
    ) -> CoreResult<Vec<Arc<AgentRecord>>> {
        let mut seen = HashSet::new();
        let mut found = Vec::with_capacity(ids.len());
        let mut invalid = Vec::new();
        let mut names_sender = false;
        for id in ids {
            if !seen.insert(id.as_str()) {
                continue;
            }
            if *id == sender.agent_id {
                names_sender = true;
                invalid.push(id.clone());
                continue;
            }
            match self.registry().member(team.pk, id) {
                Some(agent) => found.push(agent),
                None => invalid.push(id.clone()),
            }
        }
        if invalid.is_empty() {
            return Ok(found);
        }
        let message = if names_sender && invalid.len() == 1 {
            format!("{field} cannot include the sender")
        } else {
            format!("not members of this team: {}", invalid.join(", "))
        };
        Err(CoreError::new(ErrorCode::InvalidRecipient, message)
            .with("field", field)
            .with("invalid_ids", invalid))
    }

    /// The first answer to a request retried with the same idempotency key, if any.
    async fn replay<T: DeserializeOwned>(
        &self,
        sender: &AgentRecord,
        idem: &Option<Idempotency>,
    ) -> CoreResult<Option<T>> {
        let Some(idem) = idem else { return Ok(None) };
        match self.store().find_answer(sender.pk, &idem.key).await? {
            Some(stored) => idem.accept(stored).map(Some),
            None => Ok(None),
        }
    }

    /// Writes the message to its recipients as one job of the group commit and answers
    /// with `answer`.
    ///
    /// `check` runs inside the transaction, for rules that must hold at the moment of
    /// writing (a response's deadline and "no final response yet"). With an idempotency
    /// key, the key is checked again inside the transaction (two concurrent retries
    /// cannot both write) and the answer is stored with the message.
    pub(super) async fn post<T, C, A>(
        &self,
        sender: &AgentRecord,
        idem: Option<Idempotency>,
        outgoing: Outgoing,
        check: C,
        answer: A,
    ) -> CoreResult<T>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        C: FnOnce(PostContext) -> CoreResult<()> + Send + 'static,
        A: FnOnce(&Posted) -> T + Send + 'static,
    {
        let Outgoing {
            message,
            recipients,
            response,
            spends_budget,
        } = outgoing;
        let spending = self.message_spending(sender, &message, spends_budget);
        let recipient_ids: Vec<AgentId> = recipients.iter().map(|a| a.agent_id.clone()).collect();
        let (live, disabled): (Vec<_>, Vec<_>) = recipients
            .into_iter()
            .partition(|a| a.communication_enabled);
        let failed: Vec<AgentId> = disabled.iter().map(|a| a.agent_id.clone()).collect();
        let span = self.message_span(sender, &message, &recipient_ids);
        let post = NewPost {
            message,
            recipient_ids,
            deliver_to: live.iter().map(|a| a.pk).collect(),
            response,
            charges: spending.charges.clone(),
        };
        let claim = idem.as_ref().map(|i| i.claim(sender));
        let store_answer = idem.is_some();
        let hub = self.hub().clone();
        let sender_id = sender.agent_id.clone();
        let decide = move |message: &NewMessage, context: PostContext| {
            check(context)?;
            let pushes = reserve_pushes(&hub, &live, message, &sender_id, context.now);
            let posted = Posted {
                message_id: message.message_id.clone(),
                timestamp: context.now,
                delivery: DeliveryStatus {
                    delivered_to: pushes.delivered_to.clone(),
                    failed_delivery: failed,
                    pending_delivery: pushes.pending_delivery.clone(),
                },
            };
            // The answer is known before the write (ids and time are chosen here), so it
            // is stored with the message.
            let value = answer(&posted);
            let stored = store_answer.then(|| stored(&value)).transpose()?;
            Ok(Decided {
                value: (value, pushes),
                answer: stored,
            })
        };
        let outcome = self
            .store()
            .post(post, claim, decide, |(value, pushes), written| {
                let pushed_to = pushes.send(&written?);
                Ok::<_, CoreError>((value, pushed_to))
            })
            .await
            .map_err(|e| self.over_budget(e, &spending))?;
        match (outcome, &idem) {
            (PostOutcome::Written((value, pushed_to)), _) => {
                // Ended here, on the request's thread, not on the writer's after the
                // commit: the span's buffer is freed where it was made (`spans::wire`).
                spans::finish(span, &pushed_to);
                Ok(value)
            }
            (PostOutcome::Replayed(stored), Some(idem)) => idem.accept(stored),
            (PostOutcome::Replayed(_), None) => Err(CoreError::internal(
                "storage replayed an answer for a post without an idempotency key",
            )),
        }
    }
}

/// Frames of one message waiting for its commit: outbox slots reserved on the live
/// connections of its recipients, and the shared event they will carry.
pub(super) struct Pushes {
    hub: Arc<Hub>,
    /// Recipients that will get it pushed.
    pub delivered_to: Vec<AgentId>,
    /// Recipients that find it in their inbox when they connect.
    pub pending_delivery: Vec<AgentId>,
    /// Each with whether the entry is news for its agent.
    reservations: Vec<(Reservation, bool)>,
    event: Option<Arc<Event>>,
    /// The event of the recipients for whom a publish is not news (its frame says so).
    quiet_event: Option<Arc<Event>>,
    /// The message's span, ended when the pushes go (spans exported only).
    span: PendingSpan,
}

/// Reserves an outbox slot on each live connection of `live` (before the commit, so the
/// answer can say exactly who gets the message pushed).
pub(super) fn reserve_pushes(
    hub: &Arc<Hub>,
    live: &[Arc<AgentRecord>],
    message: &NewMessage,
    sender_id: &AgentId,
    timestamp: Timestamp,
) -> Pushes {
    let mut pushes = Pushes {
        hub: hub.clone(),
        delivered_to: Vec::new(),
        pending_delivery: Vec::new(),
        reservations: Vec::new(),
        event: None,
        quiet_event: None,
        span: None,
    };
    for agent in live {
        let reservation = hub.reserve(agent.pk, message.route);
        if reservation.delivers() {
            pushes.delivered_to.push(agent.agent_id.clone());
        } else if hub.is_connected_elsewhere(agent.pk, message.route) {
            // Another node holds its connection: that node pushes it once it hears of
            // the commit (`core::other_nodes`).
            pushes.delivered_to.push(agent.agent_id.clone());
        } else {
            pushes.pending_delivery.push(agent.agent_id.clone());
        }
        // Kept whatever it holds: connections that had no room, and connections
        // registered before the commit, are told after it (`Pushes::send`).
        let news = message.is_news_for(agent.pk);
        pushes.reservations.push((reservation, news));
    }
    let delivered = |news: bool| {
        pushes
            .reservations
            .iter()
            .any(|(r, n)| r.delivers() && *n == news)
    };
    if delivered(true) {
        pushes.event = Some(event_for(message, sender_id, timestamp, true));
    }
    if delivered(false) {
        pushes.quiet_event = Some(event_for(message, sender_id, timestamp, false));
    }
    pushes
}

impl Pushes {
    /// Ends `span` when the pushes go.
    pub(super) fn spanned(mut self, span: PendingSpan) -> Pushes {
        self.span = span;
        self
    }

    /// Sends the frames, each with its recipient's sequence number (after the commit),
    /// and wakes those waiting for the recipients' inboxes; who got it pushed.
    pub(super) fn send(self, written: &PostResult) -> Vec<AgentId> {
        for (agent, _) in &written.entries {
            self.hub.inbox_changed(*agent);
        }
        spans::finish(self.span, &self.delivered_to);
        for (reservation, news) in self.reservations {
            self.hub.recheck_unseen(&reservation);
            let event = if news { &self.event } else { &self.quiet_event };
            match (written.seq_of(reservation.agent_pk()), event) {
                (Some(seq), Some(event)) => reservation.deliver(Push {
                    seq,
                    event: event.clone(),
                }),
                _ => reservation.committed(),
            }
        }
        self.delivered_to
    }
}

/// The push of an inbox entry, rendered when first sent and shared by all recipients
/// (of a publish: all those for whom it is news, or all the others).
fn event_for(
    message: &NewMessage,
    sender_id: &AgentId,
    timestamp: Timestamp,
    news: bool,
) -> Arc<Event> {
    let mut view = view_of(message, sender_id, timestamp);
    if view.cause_by.is_some() {
        view.news = Some(news);
    }
    let view = Arc::new(view);
    let shared = view.clone();
    Event::with_message(news, view, move || {
        push_body(&shared).map_err(|e| e.to_string())
    })
}

/// A message about to be written, as its recipients will see it (before its sequence
/// number is known).
pub(super) fn view_of(
    m: &NewMessage,
    sender_agent_id: &AgentId,
    timestamp: Timestamp,
) -> MessageView {
    MessageView {
        message_id: m.message_id.clone(),
        kind: m.kind,
        seq: None,
        sender_agent_id: sender_agent_id.to_owned(),
        sender_role: m.sender_role.clone(),
        message_type: m.message_type,
        content: m.content.clone(),
        priority: m.priority,
        timestamp,
        read_status: false,
        requires_response: m.requires_response,
        response_deadline: m.response_deadline,
        context_reference: m.context_reference.clone(),
        thread_id: m.thread_id.clone(),
        in_reply_to: m.in_reply_to.clone(),
        response_status: m.response_status,
        cause_by: m.published.as_ref().map(|p| p.cause_by.clone()),
        sent_from: m.published.as_ref().map(|_| sender_agent_id.clone()),
        send_to: m.published.as_ref().map(|p| p.send_to.clone()),
        instruct_content: m
            .published
            .as_ref()
            .and_then(|p| p.instruct_content.clone()),
        news: None,
        route: m.route,
        traceparent: Some(crate::model::trace::traceparent(
            &m.message_id,
            m.trace.as_ref(),
        )),
        tracestate: m.trace.as_ref().and_then(|t| t.state.clone()),
    }
}

/// An answer as stored with its idempotency key.
fn stored(value: &impl Serialize) -> CoreResult<String> {
    serde_json::to_string(value)
        .map_err(|e| CoreError::internal(format!("storing the answer: {e}")))
}
