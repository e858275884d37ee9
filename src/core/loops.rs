//! The loop guard (`docs/loop-guard.md`): every send that extends a causal chain is
//! checked against its team's `max_hops` and cycle rule before anything is written.
//!
//! A chain is followed through what a send names: a message's `in_reply_to` (or, naming
//! only a `thread_id`, the thread's newest message), a response's original, a publish's
//! thread, a task's `parent_task_id` (A2A `referenceTaskIds`). The server computes the
//! length from the parent row; nothing a client sends counts. A refusal is
//! `LOOP_DETECTED` with a [`LoopStopped`] as details, counted in
//! `switchboard_loops_stopped_total`, and — once per chain in the cycle window — pushed
//! to the team's activity watchers and told to the team's supervisor.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use switchboard_types::ErrorCode;
use switchboard_types::ids::{AgentId, AgentPk, TeamPk};
use switchboard_types::loops::{LoopRule, LoopStopped, MAX_CYCLE_AGENTS};
use switchboard_types::messages::{Content, MessageKind, MessageType, Priority};
use switchboard_types::time::Timestamp;

use super::activity::Alarm;
use super::delivery::Outgoing;
use super::{Core, CoreError, CoreResult, ids};
use crate::model::{AgentRecord, Chain, MessageRecord, NewMessage, TeamRecord};

/// What a chain is made of: it names its first row in a refusal's details.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Links {
    Messages,
    Tasks,
}

/// Chains already reported (team, first id) and when: a runaway loop refused a
/// thousand times tells its supervisor once.
pub struct LoopReports {
    told: Mutex<HashMap<(TeamPk, String), Instant>>,
}

/// The counter of refusals, by rule.
const STOPPED: &str = "switchboard_loops_stopped_total";

impl LoopReports {
    /// The reports, and the counter exported at 0 from the start (a dashboard sees it
    /// before the first loop).
    pub fn new() -> LoopReports {
        for rule in [LoopRule::MaxHops, LoopRule::Cycle] {
            metrics::counter!(STOPPED, "rule" => rule.as_str()).increment(0);
        }
        LoopReports {
            told: Mutex::new(HashMap::new()),
        }
    }

    /// Whether this chain's stop is news (not reported within `window`).
    pub(super) fn first_report(&self, team: TeamPk, first: &str, window: Duration) -> bool {
        let now = Instant::now();
        let mut told = self.told.lock().unwrap_or_else(|p| p.into_inner());
        if told.len() > 10_000 {
            told.retain(|_, at| now.duration_since(*at) < window);
        }
        match told.get(&(team, first.to_owned())) {
            Some(at) if now.duration_since(*at) < window => false,
            _ => {
                told.insert((team, first.to_owned()), now);
                true
            }
        }
    }
}

/// The agents of a cycle the last sends of `tail` go round, if the cycle rule holds:
/// the last `messages + 1` sends (the one being checked last) each sent by the agent
/// that sent the one `p` places before it, for a cycle of `p` distinct agents
/// (2 ≤ p ≤ 8) that goes round at least twice, the first of them within `window`
/// seconds of `now`. The agents come in the order they send, starting with the newest
/// sender.
pub(super) fn cycle_of(
    tail: &[(i64, i64)],
    messages: u32,
    window: u64,
    now: i64,
) -> Option<Vec<i64>> {
    let need = usize::try_from(messages).ok()?.checked_add(1)?;
    if messages == 0 || tail.len() < need {
        return None;
    }
    let last = &tail[tail.len() - need..];
    let window = i64::try_from(window).unwrap_or(i64::MAX);
    if now.saturating_sub(last[0].1) > window {
        return None;
    }
    (2..=MAX_CYCLE_AGENTS.min(need / 2)).find_map(|p| {
        let repeats = (p..need).all(|i| last[i].0 == last[i - p].0);
        let mut round: Vec<i64> = last[need - p..].iter().map(|(a, _)| *a).collect();
        round.rotate_right(1);
        let distinct = round
            .iter()
            .enumerate()
            .all(|(i, a)| !round[..i].contains(a));
        (repeats && distinct).then_some(round)
    })
}

impl Core {
    /// The chain a message extends: the one it answers, or else the newest message of
    /// the thread it names that the sender received — what it can be reacting to (none:
    /// it starts one).
    pub(super) async fn message_parent(
        &self,
        sender: &AgentRecord,
        answers: Option<&MessageRecord>,
        thread_id: Option<&str>,
    ) -> CoreResult<Option<Chain>> {
        if let Some(original) = answers {
            return Ok(Some(original.chain()));
        }
        let Some(thread_id) = thread_id else {
            return Ok(None);
        };
        let tip = self.store().thread_tip(sender.pk, thread_id).await?;
        Ok(tip.map(|m| m.chain()))
    }

    /// The chain a send by `sender` makes of `parent` (`None`: it starts one), or
    /// `LOOP_DETECTED` when the team's guard refuses it.
    pub(super) fn guard(
        &self,
        team: &TeamRecord,
        sender: &AgentRecord,
        parent: Option<Chain>,
        links: Links,
    ) -> CoreResult<Option<Chain>> {
        let Some(parent) = parent else {
            return Ok(None);
        };
        let now = Timestamp::now();
        let guard = &team.loop_guard;
        // `max_hops` counts within the window: a chain quiet for longer counts afresh,
        // so a thread that was stopped opens again.
        let chain = parent.rested(now, guard.cycle_window_seconds).extended(
            sender.pk,
            now,
            matches!(links, Links::Tasks),
        );
        let (rule, cycle) = if guard.max_hops > 0 && chain.hops > guard.max_hops {
            (LoopRule::MaxHops, Vec::new())
        } else {
            let secs = now.micros().div_euclid(1_000_000);
            match cycle_of(
                &chain.tail,
                guard.cycle_messages,
                guard.cycle_window_seconds,
                secs,
            ) {
                Some(cycle) => (LoopRule::Cycle, cycle),
                None => return Ok(Some(chain)),
            }
        };
        let (first_message_id, first_task_id) = match links {
            Links::Messages => (Some(chain.first.clone()), None),
            Links::Tasks => (None, Some(chain.first.clone())),
        };
        let stopped = LoopStopped {
            rule,
            agent_id: sender.agent_id.clone(),
            chain_length: chain.hops,
            max_hops: guard.max_hops,
            first_message_id,
            first_task_id,
            cycle_agent_ids: cycle
                .into_iter()
                .map(|a| self.agent_name(AgentPk(a)))
                .collect(),
            chain_agent_ids: chain
                .builders()
                .into_iter()
                .map(|a| self.agent_name(a))
                .collect(),
        };
        metrics::counter!(STOPPED, "rule" => rule.as_str()).increment(1);
        self.refusal_span(
            &sender.agent_id,
            "LOOP_DETECTED",
            ("switchboard.loop_rule", rule.as_str().to_owned()),
        );
        let window = Duration::from_secs(guard.cycle_window_seconds);
        if self
            .inner
            .loop_reports
            .first_report(team.pk, &chain.first, window)
        {
            let core = self.clone();
            let (team, stopped) = (team.pk, stopped.clone());
            tokio::spawn(async move { core.report_loop(team, stopped).await });
        }
        Err(refusal(&stopped))
    }

    /// Tells the team's activity watchers and its supervisor that a chain was stopped.
    async fn report_loop(&self, team: TeamPk, stopped: LoopStopped) {
        tracing::info!(
            rule = stopped.rule.as_str(),
            agent_id = %stopped.agent_id,
            chain_length = stopped.chain_length,
            "the loop guard stopped a chain"
        );
        self.announce_activity(team, Alarm::Loop(stopped.clone()))
            .await;
        let Some(record) = self.registry().team(team) else {
            return;
        };
        if let Err(err) = self.tell_supervisor(&record, &stopped).await {
            tracing::warn!(error = %err, "the supervisor could not be told of a stopped loop");
        }
    }

    /// The supervisor's notice of a stopped chain.
    async fn tell_supervisor(&self, team: &TeamRecord, stopped: &LoopStopped) -> CoreResult<()> {
        let first = stopped
            .first_message_id
            .as_deref()
            .or(stopped.first_task_id.as_deref())
            .unwrap_or_default();
        let notice = Notice {
            from: &stopped.agent_id,
            kind: "loop_detected",
            details: serde_json::to_value(stopped)
                .map_err(|e| CoreError::internal(format!("rendering a loop notice: {e}")))?,
            text: notice_text(stopped, first),
            thread: format!("loop-guard:{first}"),
        };
        self.notify_supervisor(team, notice).await
    }

    /// A notice to the team's supervisor (`loop_guard.supervisor_agent_id`), as a message
    /// from the agent whose send was refused: the send it could not make, told to the one
    /// who can act on it. Spends no budget and extends no chain.
    pub(super) async fn notify_supervisor(
        &self,
        team: &TeamRecord,
        notice: Notice<'_>,
    ) -> CoreResult<()> {
        let Some(supervisor_id) = &team.loop_guard.supervisor_agent_id else {
            return Ok(());
        };
        let (Some(supervisor), Some(sender)) = (
            self.registry().member(team.pk, supervisor_id),
            self.registry().member(team.pk, notice.from),
        ) else {
            return Ok(());
        };
        if supervisor.pk == sender.pk {
            return Ok(());
        }
        let mut data = Map::new();
        data.insert("type".into(), Value::from(notice.kind));
        if let Value::Object(fields) = notice.details {
            data.extend(fields);
        }
        let message = NewMessage::new(
            ids::ordered_id("msg").into(),
            &sender,
            MessageKind::Message,
            MessageType::Coordination,
            Content {
                text: notice.text,
                data,
                attachments: Vec::new(),
            },
        )
        .priority(Priority::High)
        .thread(Some(notice.thread), None);
        let outgoing = Outgoing {
            message,
            recipients: vec![supervisor],
            response: None,
            spends_budget: false,
        };
        self.post(&sender, None, outgoing, |_| Ok(()), |_| ()).await
    }
}

/// What a supervisor is told (see [`Core::notify_supervisor`]).
pub(super) struct Notice<'a> {
    /// The agent whose send was refused.
    pub from: &'a AgentId,
    /// `content.data.type`.
    pub kind: &'static str,
    /// The refusal's details, the rest of `content.data`.
    pub details: Value,
    pub text: String,
    pub thread: String,
}

/// The supervisor notice's text.
fn notice_text(stopped: &LoopStopped, first: &str) -> String {
    let why = match stopped.rule {
        LoopRule::MaxHops => format!("longer than max_hops ({})", stopped.max_hops),
        LoopRule::Cycle => format!(
            "going round {} again",
            stopped
                .cycle_agent_ids
                .iter()
                .map(|a| a.as_str())
                .collect::<Vec<_>>()
                .join(" → ")
        ),
    };
    let built_by = stopped
        .chain_agent_ids
        .iter()
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "Loop guard: a send by {} was refused — the chain from {first}, built by {built_by}, \
         would be {} hops, {why}.",
        stopped.agent_id, stopped.chain_length
    )
}

/// `LOOP_DETECTED` with the stop as details.
fn refusal(stopped: &LoopStopped) -> CoreError {
    let message = match stopped.rule {
        LoopRule::MaxHops => format!(
            "this send would be hop {} of its chain; the team allows {}",
            stopped.chain_length, stopped.max_hops
        ),
        LoopRule::Cycle => format!(
            "this send would go round the same {} agents again ({} hops so far)",
            stopped.cycle_agent_ids.len(),
            stopped.chain_length - 1
        ),
    };
    let mut error = CoreError::new(ErrorCode::LoopDetected, message);
    if let Ok(Value::Object(fields)) = serde_json::to_value(stopped) {
        for (key, value) in fields {
            error = error.with(&key, value);
        }
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tail(agents: &[i64]) -> Vec<(i64, i64)> {
        agents.iter().map(|a| (*a, 1000)).collect()
    }

    #[test]
    fn a_three_agent_cycle_is_found_after_its_turns() {
        let round = [1, 2, 3].repeat(4);
        // 12 sends going round, and the 13th (agent 1 again) is checked.
        let mut sends = round.clone();
        sends.push(1);
        assert_eq!(cycle_of(&tail(&sends), 12, 60, 1000), Some(vec![1, 2, 3]));
        // One send fewer: not yet.
        assert_eq!(cycle_of(&tail(&sends[1..]), 12, 60, 1000), None);
    }

    #[test]
    fn a_new_agent_or_an_old_first_send_breaks_the_cycle() {
        let mut sends = [1, 2].repeat(6);
        sends.push(1);
        assert!(cycle_of(&tail(&sends), 12, 60, 1000).is_some());
        sends[6] = 9;
        assert_eq!(cycle_of(&tail(&sends), 12, 60, 1000), None);
        let mut old = tail(&[1, 2].repeat(6));
        old.push((1, 1000));
        old[0].1 = 900;
        assert_eq!(cycle_of(&old, 12, 60, 1000), None);
        assert!(cycle_of(&old, 12, 100, 1000).is_some());
    }

    #[test]
    fn a_chain_remembers_enough_for_the_longest_rule() {
        let at = Timestamp::now();
        let mut chain = Chain::first("m1", AgentPk(1), at);
        for i in 0..100 {
            chain = chain.extended(AgentPk(2 + i % 2), at, false);
        }
        assert_eq!(chain.hops, 101);
        assert_eq!(chain.tail.len(), crate::model::CHAIN_TAIL);
        let secs = at.micros().div_euclid(1_000_000);
        let max = switchboard_types::loops::MAX_CYCLE_MESSAGES;
        assert_eq!(cycle_of(&chain.tail, max, 60, secs), Some(vec![3, 2]));
    }

    #[test]
    fn an_agent_repeating_itself_is_no_cycle_and_zero_is_off() {
        assert_eq!(cycle_of(&tail(&[1; 20]), 12, 60, 1000), None);
        let mut sends = [1, 2].repeat(6);
        sends.push(1);
        assert_eq!(cycle_of(&tail(&sends), 0, 60, 1000), None);
    }
}
