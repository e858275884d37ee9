//! What other nodes committed, heard through PostgreSQL's own `LISTEN`/`NOTIFY`.
//!
//! Every batch that added inbox entries or changed tasks sends **one** notification (more
//! only when its payload would pass PostgreSQL's 8,000-byte limit) on [`CHANNEL`], inside
//! its transaction, so it is delivered exactly when the batch commits and never for a
//! batch that rolled back: the newest seq of each recipient (`a<agent>:<seq>`) and each
//! changed task (`t<task>`), and `r` when a team or an agent changed, comma-separated. Each node listens on a connection of its
//! own and hands what it hears to the core ([`Change`]), which pushes the entries to its
//! own live connections from storage; a node skips its own notifications (by the
//! sending backend's process id, its writer's).
//!
//! Notifications are not stored: a node whose listening connection dropped cannot know
//! what it missed. It connects again and reports [`Change::Resync`], and the core
//! catches every live connection up from storage, so nothing is lost, only late.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use switchboard_types::ids::{AgentPk, TaskPk};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::model::{Change, PostResult};

/// The channel every node notifies and listens on.
pub const CHANNEL: &str = "switchboard";

/// Payloads stay under this many bytes (PostgreSQL refuses 8,000 and more).
const PAYLOAD_MAX: usize = 7_900;

/// What a batch changed, for its notification.
#[derive(Debug, Default)]
pub(super) struct Notes {
    inbox: BTreeMap<i64, i64>,
    tasks: BTreeSet<i64>,
    registry: bool,
}

impl Notes {
    pub(super) fn entries(&mut self, result: &PostResult) {
        for (agent, seq) in &result.entries {
            let newest = self.inbox.entry(agent.0).or_insert(*seq);
            *newest = (*newest).max(*seq);
        }
    }

    pub(super) fn task(&mut self, task: TaskPk) {
        self.tasks.insert(task.0);
    }

    /// A team or an agent changed.
    pub(super) fn registry(&mut self) {
        self.registry = true;
    }

    pub(super) fn clear(&mut self) {
        self.inbox.clear();
        self.tasks.clear();
        self.registry = false;
    }

    /// The `NOTIFY` statements of the batch, each followed by `; `, to send in the
    /// commit's round trip (empty when the batch changed nothing others push). The
    /// payload is digits, letters and punctuation of our own, never client text.
    pub(super) fn statements(&self) -> String {
        let items = self
            .inbox
            .iter()
            .map(|(agent, seq)| format!("a{agent}:{seq}"))
            .chain(self.tasks.iter().map(|task| format!("t{task}")))
            .chain(self.registry.then(|| "r".to_owned()));
        let mut sql = String::new();
        let mut payload = String::new();
        for item in items {
            if !payload.is_empty() && payload.len() + 1 + item.len() > PAYLOAD_MAX {
                let _ = write!(sql, "NOTIFY {CHANNEL}, '{payload}'; ");
                payload.clear();
            }
            if !payload.is_empty() {
                payload.push(',');
            }
            payload.push_str(&item);
        }
        if !payload.is_empty() {
            let _ = write!(sql, "NOTIFY {CHANNEL}, '{payload}'; ");
        }
        sql
    }
}

/// Reads a payload back; items it does not know are skipped (a newer node's).
fn parse(payload: &str) -> Vec<Change> {
    payload
        .split(',')
        .filter_map(|item| match item.split_at_checked(1)? {
            ("a", rest) => {
                let (agent, seq) = rest.split_once(':')?;
                Some(Change::Inbox {
                    agent: AgentPk(agent.parse().ok()?),
                    seq: seq.parse().ok()?,
                })
            }
            ("t", task) => Some(Change::Task(TaskPk(task.parse().ok()?))),
            ("r", "") => Some(Change::Registry),
            // A registry epoch another node took (`nodes.rs`): read the registry again.
            ("e", _) => Some(Change::Registry),
            _ => None,
        })
        .collect()
}

/// Listens until `stop`, sending what other nodes committed to `changes`. `own` is the
/// process id of this node's writer connection (its notifications are skipped).
pub(super) async fn run(
    options: PgConnectOptions,
    own: Arc<AtomicU32>,
    node: Arc<std::sync::OnceLock<String>>,
    changes: mpsc::Sender<Vec<Change>>,
    stop: CancellationToken,
) {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options);
    let mut first = true;
    loop {
        let mut listener = tokio::select! {
            () = stop.cancelled() => return,
            listener = connect(&pool) => listener,
        };
        if !first && changes.send(vec![Change::Resync]).await.is_err() {
            return;
        }
        first = false;
        loop {
            let heard = tokio::select! {
                () = stop.cancelled() => return,
                heard = listener.try_recv() => heard,
            };
            match heard {
                Ok(Some(n)) if n.process_id() == own.load(Ordering::Relaxed) => {}
                // This node's own registry epoch: it holds its own change already.
                Ok(Some(n))
                    if node
                        .get()
                        .is_some_and(|me| n.payload().strip_prefix('e') == Some(me.as_str())) => {}
                Ok(Some(n)) => {
                    let parsed = parse(n.payload());
                    if !parsed.is_empty() && changes.send(parsed).await.is_err() {
                        return;
                    }
                }
                Ok(None) | Err(_) => {
                    tracing::warn!("the PostgreSQL notification connection dropped; reconnecting");
                    break;
                }
            }
        }
    }
}

/// A listener on [`CHANNEL`], retried every second until the database answers.
async fn connect(pool: &sqlx::PgPool) -> PgListener {
    loop {
        let attempt = async {
            let mut listener = PgListener::connect_with(pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        match attempt.await {
            Ok(listener) => return listener,
            Err(err) => {
                tracing::debug!(error = %err, "listening for other nodes failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_one_notification_until_the_payload_limit() {
        let mut notes = Notes::default();
        notes.entries(&PostResult {
            pk: switchboard_types::ids::MessagePk(1),
            entries: vec![(AgentPk(7), 3), (AgentPk(9), 1)],
        });
        notes.entries(&PostResult {
            pk: switchboard_types::ids::MessagePk(2),
            entries: vec![(AgentPk(7), 4)],
        });
        notes.task(TaskPk(5));
        assert_eq!(notes.statements(), "NOTIFY switchboard, 'a7:4,a9:1,t5'; ");
        let mut many = Notes::default();
        for agent in 0..2_000 {
            many.entries(&PostResult {
                pk: switchboard_types::ids::MessagePk(1),
                entries: vec![(AgentPk(agent), 1_000_000)],
            });
        }
        let sql = many.statements();
        let payloads: Vec<&str> = sql
            .split("; ")
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.trim_start_matches("NOTIFY switchboard, '")
                    .trim_end_matches('\'')
            })
            .collect();
        assert!(payloads.len() > 1);
        assert!(payloads.iter().all(|p| p.len() <= PAYLOAD_MAX));
        let heard: usize = payloads.iter().map(|p| parse(p).len()).sum();
        assert_eq!(heard, 2_000);
    }

    #[test]
    fn unknown_items_are_skipped() {
        assert_eq!(
            parse("a1:2,x9,t3,a:1,tz,r"),
            vec![
                Change::Inbox {
                    agent: AgentPk(1),
                    seq: 2
                },
                Change::Task(TaskPk(3)),
                Change::Registry
            ]
        );
    }
}
