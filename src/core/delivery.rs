//! The one path every sending operation takes (SEND_MESSAGE, RESPOND_TO_MESSAGE,
//! BROADCAST_UPDATE, REQUEST_ASSISTANCE, task notifications): check the sender, resolve
//! recipients, honour an idempotency key, write the message and its inbox entries in one
//! job of the group commit, and tell who got it.

use std::collections::HashSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::Core;
use super::error::{CoreError, CoreResult, ErrorCode};
use super::messages::{Content, MessageKind, MessageType, Priority, ResponseStatus, event_for};
use super::registry::{AgentRecord, Caller, TeamRecord};
use super::time::Timestamp;
use crate::hub::{Event, Hub, Push, Reservation};
use crate::store::{self, WriteTx};

/// The contract's `delivery_status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct DeliveryStatus {
    /// Pushed to at least one live connection of the agent.
    pub delivered_to: Vec<String>,
    /// Cannot receive: its (or the team's) communication is disabled, or it was removed.
    pub failed_delivery: Vec<String>,
    /// Stored in the agent's inbox; pushed when it connects.
    pub pending_delivery: Vec<String>,
}

/// A message about to be written.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub message_id: String,
    pub team_pk: i64,
    pub kind: MessageKind,
    pub sender_pk: i64,
    pub sender_role: String,
    pub message_type: MessageType,
    pub priority: Priority,
    pub content: Content,
    pub requires_response: bool,
    pub response_deadline: Option<Timestamp>,
    pub context_reference: Option<String>,
    pub thread_id: Option<String>,
    pub in_reply_to: Option<String>,
    pub response_status: Option<ResponseStatus>,
}

/// A message with where it goes.
pub struct Outgoing {
    pub message: NewMessage,
    /// Resolved recipients (members; those with communication disabled fail).
    pub recipients: Vec<Arc<AgentRecord>>,
    /// `(original pk, status)` when the message is a response to another.
    pub response: Option<(i64, ResponseStatus)>,
}

/// What an operation needs to know to answer, before the message is written.
#[derive(Debug, Clone)]
pub struct Posted {
    pub message_id: String,
    pub timestamp: Timestamp,
    pub delivery: DeliveryStatus,
}

/// An `Idempotency-Key` with the request it was sent with.
pub struct Idempotency {
    key: String,
    operation: &'static str,
    hash: [u8; 32],
}

/// Longest idempotency key.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

impl Idempotency {
    /// `None` without a key; validates the key's shape otherwise.
    pub fn new(
        key: Option<&str>,
        operation: &'static str,
        request: &impl Serialize,
    ) -> CoreResult<Option<Idempotency>> {
        let Some(key) = key else { return Ok(None) };
        if key.is_empty()
            || key.len() > MAX_IDEMPOTENCY_KEY
            || !key.bytes().all(|b| b.is_ascii_graphic())
        {
            return Err(CoreError::validation(
                "Idempotency-Key",
                format!(
                    "an idempotency key is 1 to {MAX_IDEMPOTENCY_KEY} visible ASCII characters"
                ),
            ));
        }
        let body = serde_json::to_vec(request)
            .map_err(|e| CoreError::internal(format!("hashing the request: {e}")))?;
        Ok(Some(Idempotency {
            key: key.to_owned(),
            operation,
            hash: Sha256::digest(&body).into(),
        }))
    }

    /// The stored first answer, if this key was used before for the same request.
    fn accept<T: DeserializeOwned>(&self, stored: store::idempotency::Stored) -> CoreResult<T> {
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
}

enum Outcome<T> {
    Replayed(T),
    Fresh(T, store::messages::PostSlot, Pushes),
}

impl Core {
    /// The calling agent, which the body names in `field`; naming anyone else is
    /// `FORBIDDEN` (the token decides who calls).
    pub(crate) fn sender(
        &self,
        caller: &Caller,
        claimed: &str,
        field: &str,
    ) -> CoreResult<(Arc<TeamRecord>, Arc<AgentRecord>)> {
        let (team, me) = self.acting_agent(caller)?;
        if claimed != me.agent_id {
            return Err(CoreError::forbidden(format!(
                "{field} is '{claimed}' but the token belongs to '{}'",
                me.agent_id
            ))
            .with("field", field));
        }
        Ok((team, me))
    }

    /// Communication switches and the rate limit, checked before anything is sent.
    pub(crate) fn check_can_send(&self, team: &TeamRecord, sender: &AgentRecord) -> CoreResult<()> {
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

    /// Explicit recipient ids → members. Duplicates collapse; the sender and anything
    /// that is not a current member of the team is `INVALID_RECIPIENT`, all listed in
    /// `details.invalid_ids`.
    pub(crate) fn resolve_recipients(
        &self,
        team: &TeamRecord,
        sender: &AgentRecord,
        ids: &[String],
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
    pub(crate) async fn replay<T: DeserializeOwned>(
        &self,
        sender: &AgentRecord,
        idem: &Option<Idempotency>,
    ) -> CoreResult<Option<T>> {
        let Some(idem) = idem else { return Ok(None) };
        match store::idempotency::find(self.store().reader(), sender.pk, &idem.key).await? {
            Some(stored) => idem.accept(stored).map(Some),
            None => Ok(None),
        }
    }

    /// Writes `message` to `recipients` (and `response`, when it answers a message) as
    /// one self-contained job of the group commit, and answers with `answer`.
    ///
    /// `check` runs first inside the transaction, for rules that must hold at the moment
    /// of writing (it reads; it must not write). With an idempotency key, the key is
    /// checked again inside the transaction (two concurrent retries cannot both write)
    /// and the answer is stored with the message, in the same query.
    pub(crate) async fn post<T, C, A>(
        &self,
        sender: &AgentRecord,
        idem: Option<Idempotency>,
        outgoing: Outgoing,
        check: C,
        answer: A,
    ) -> CoreResult<T>
    where
        T: Serialize + DeserializeOwned + Send + 'static,
        C: for<'c> FnOnce(&'c mut WriteTx, Timestamp) -> BoxFuture<'c, CoreResult<()>>
            + Send
            + 'static,
        A: FnOnce(&Posted) -> T + Send + 'static,
    {
        let Outgoing {
            message,
            recipients,
            response,
        } = outgoing;
        let agent_pk = sender.pk;
        let recipient_ids: Vec<String> = recipients.iter().map(|a| a.agent_id.clone()).collect();
        let (live, disabled): (Vec<_>, Vec<_>) = recipients
            .into_iter()
            .partition(|a| a.communication_enabled);
        let deliver_pks: Vec<i64> = live.iter().map(|a| a.pk).collect();
        let failed: Vec<String> = disabled.iter().map(|a| a.agent_id.clone()).collect();
        let sender_id = sender.agent_id.clone();
        let hub = self.hub().clone();
        let rendered = store::messages::RenderedMessage::new(message, recipient_ids)?;

        self.store()
            .write_self_contained(
                move |tx| {
                    Box::pin(async move {
                        if let Some(idem) = &idem
                            && let Some(stored) =
                                store::idempotency::find(tx.conn().await?, agent_pk, &idem.key)
                                    .await?
                        {
                            return Ok(Outcome::Replayed(idem.accept(stored)?));
                        }
                        let timestamp = Timestamp::now();
                        check(&mut *tx, timestamp).await?;
                        let message = rendered.message();
                        let (delivered_to, pending_delivery, pushes) =
                            reserve_pushes(&hub, &live, message, &sender_id, timestamp);
                        let posted = Posted {
                            message_id: message.message_id.clone(),
                            timestamp,
                            delivery: DeliveryStatus {
                                delivered_to,
                                failed_delivery: failed,
                                pending_delivery,
                            },
                        };
                        // The answer is known before the write (ids and timestamp are
                        // chosen here), so it is stored with the message.
                        let answer = answer(&posted);
                        let idempotency = match idem {
                            Some(idem) => Some(store::messages::IdempotencyRow {
                                agent_pk,
                                answer: serde_json::to_string(&answer).map_err(|e| {
                                    CoreError::internal(format!("storing the answer: {e}"))
                                })?,
                                key: idem.key,
                                operation: idem.operation,
                                request_hash: idem.hash,
                            }),
                            None => None,
                        };
                        let slot = tx.stage_post(store::messages::StagedPost::new(
                            rendered,
                            deliver_pks,
                            timestamp,
                            response.map(|(original_pk, status)| (original_pk, agent_pk, status)),
                            idempotency,
                        ));
                        Ok::<_, CoreError>(Outcome::Fresh(answer, slot, pushes))
                    })
                },
                |outcome| match outcome {
                    Outcome::Replayed(answer) => Ok(answer),
                    Outcome::Fresh(answer, slot, pushes) => {
                        pushes.send(&slot.outcome()?);
                        Ok(answer)
                    }
                },
            )
            .await
    }
}

/// Frames of one message waiting for its commit: outbox slots reserved on the live
/// connections of its recipients, and the shared event they will carry.
pub(crate) struct Pushes {
    reservations: Vec<Reservation>,
    event: Option<Arc<Event>>,
}

/// Reserves an outbox slot on each live connection of `live` (before the commit, so the
/// answer can say exactly who gets the message pushed) and returns who will get it
/// pushed (`delivered_to`), who only finds it in the inbox (`pending_delivery`), and the
/// pushes to send once committed.
pub(crate) fn reserve_pushes(
    hub: &Hub,
    live: &[Arc<AgentRecord>],
    message: &NewMessage,
    sender_id: &str,
    timestamp: Timestamp,
) -> (Vec<String>, Vec<String>, Pushes) {
    let mut reservations = Vec::new();
    let mut delivered_to = Vec::new();
    let mut pending_delivery = Vec::new();
    for agent in live {
        let reservation = hub.reserve(agent.pk);
        if reservation.delivers() {
            delivered_to.push(agent.agent_id.clone());
            reservations.push(reservation);
        } else {
            pending_delivery.push(agent.agent_id.clone());
        }
    }
    let event = (!reservations.is_empty()).then(|| event_for(message, sender_id, timestamp));
    (
        delivered_to,
        pending_delivery,
        Pushes {
            reservations,
            event,
        },
    )
}

impl Pushes {
    /// Sends the frames, each with its recipient's sequence number (after the commit).
    pub(crate) fn send(self, written: &store::messages::PostResult) {
        let Some(event) = self.event else { return };
        for reservation in self.reservations {
            let seq = written
                .entries
                .iter()
                .find(|(pk, _)| *pk == reservation.agent_pk());
            if let Some((_, seq)) = seq {
                reservation.deliver(Push {
                    seq: *seq,
                    event: event.clone(),
                });
            }
        }
    }
}
