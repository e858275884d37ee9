//! Budgets (`docs/loop-guard.md`, "Budgets"): what a send spends, and its refusal.
//!
//! A send works out here which counts it spends from — the budgets in force for its
//! team (the lower of the team's and the operator's), each for the current fixed window
//! (a minute, or a UTC day) — and the store spends them in the send's own transaction:
//! a count and the send it counts commit together or not at all, on every node alike.
//! A count past its limit refuses the send with `RATE_LIMITED`, `Retry-After` at the
//! window's end, counted in `switchboard_budgets_exhausted_total`, and — once per count
//! and window — pushed to the team's activity watchers and told to its supervisor.

use std::time::Duration;

use switchboard_types::ErrorCode;
use switchboard_types::budgets::{Budget, BudgetExhausted, BudgetScope, Budgets};
use switchboard_types::ids::TeamPk;
use switchboard_types::time::Timestamp;

use super::activity::Alarm;
use super::loops::Notice;
use super::{Core, CoreError};
use crate::model::{AgentRecord, Charge, NewMessage};
use crate::store::StoreError;

/// The counter of refusals, by budget.
const EXHAUSTED: &str = "switchboard_budgets_exhausted_total";

/// What a send spends: the budgets, each with its count.
#[derive(Debug, Default)]
pub(super) struct Spending {
    budgets: Vec<Budget>,
    pub charges: Vec<Charge>,
    thread: Option<String>,
    agent: Option<switchboard_types::ids::AgentId>,
    now: i64,
}

/// Exports the counter at 0 for every budget, so a dashboard sees it before the first
/// refusal.
pub(super) fn export_metrics() {
    for budget in Budget::ALL {
        metrics::counter!(EXHAUSTED, "budget" => budget.as_str()).increment(0);
    }
}

impl Core {
    /// The operator's ceilings (`--budget`).
    pub(super) fn budget_ceiling(&self) -> &Budgets {
        &self.inner.budget_ceiling
    }

    /// What `sender` spends by sending a message (in `thread`, if any) or submitting a
    /// task, now.
    pub(super) fn spending(
        &self,
        sender: &AgentRecord,
        tasks: bool,
        thread: Option<&str>,
    ) -> Spending {
        let Some(team) = self.registry().team(sender.team_pk) else {
            return Spending::default();
        };
        let in_force = team.budgets.within(self.budget_ceiling());
        if in_force.is_empty() {
            // The usual case: nothing to count, no clock to read.
            return Spending::default();
        }
        let now = Timestamp::now().micros().div_euclid(1_000_000);
        let mut spending = Spending {
            now,
            agent: Some(sender.agent_id.clone()),
            ..Default::default()
        };
        for budget in Budget::ALL {
            let Some(limit) = in_force.get(budget) else {
                continue;
            };
            if budget.counts_tasks() != tasks {
                continue;
            }
            let key = match budget.scope() {
                BudgetScope::Team => budget.as_str().to_owned(),
                BudgetScope::Agent => format!("{}:{}", budget.as_str(), sender.pk.0),
                BudgetScope::Thread => match thread {
                    Some(thread) => {
                        spending.thread = Some(thread.to_owned());
                        format!("{}:{thread}", budget.as_str())
                    }
                    None => continue,
                },
            };
            let window = budget.window_seconds();
            spending.budgets.push(budget);
            spending.charges.push(Charge {
                team: team.pk,
                key,
                window_start: now - now.rem_euclid(window),
                limit,
            });
        }
        spending
    }

    /// What a message spends: nothing when it is a notice the server sends on an
    /// agent's behalf (`spends` false).
    pub(super) fn message_spending(
        &self,
        sender: &AgentRecord,
        message: &NewMessage,
        spends: bool,
    ) -> Spending {
        if !spends {
            return Spending::default();
        }
        self.spending(sender, false, message.thread_id.as_deref())
    }

    /// `err` as the client is to see it: a spent budget becomes `RATE_LIMITED` (and is
    /// reported); anything else is kept.
    pub(super) fn over_budget(&self, err: CoreError, spending: &Spending) -> CoreError {
        let CoreError::Store(StoreError::OverBudget(i)) = err else {
            return err;
        };
        let (Some(budget), Some(charge), Some(agent)) = (
            spending.budgets.get(i),
            spending.charges.get(i),
            spending.agent.clone(),
        ) else {
            return CoreError::internal("storage refused a budget the send did not spend");
        };
        let window = budget.window_seconds();
        let left = (charge.window_start + window - spending.now).max(1);
        let spent = BudgetExhausted {
            budget: *budget,
            limit: charge.limit,
            window_seconds: window,
            retry_after_ms: u64::try_from(left).unwrap_or(1) * 1000,
            agent_id: agent,
            thread_id: (budget.scope() == BudgetScope::Thread)
                .then(|| spending.thread.clone())
                .flatten(),
        };
        metrics::counter!(EXHAUSTED, "budget" => budget.as_str()).increment(1);
        self.refusal_span(
            &spent.agent_id,
            "RATE_LIMITED",
            ("switchboard.budget", budget.as_str().to_owned()),
        );
        let report_key = format!("budget:{}@{}", charge.key, charge.window_start);
        if self.inner.loop_reports.first_report(
            charge.team,
            &report_key,
            Duration::from_secs(window.unsigned_abs()),
        ) {
            let core = self.clone();
            let (team, spent) = (charge.team, spent.clone());
            tokio::spawn(async move { core.report_budget(team, spent).await });
        }
        refusal(&spent)
    }

    /// Tells the team's activity watchers and its supervisor that a budget is spent.
    async fn report_budget(&self, team: TeamPk, spent: BudgetExhausted) {
        tracing::info!(
            budget = spent.budget.as_str(),
            agent_id = %spent.agent_id,
            limit = spent.limit,
            "a budget is spent"
        );
        self.announce_activity(team, Alarm::Budget(spent.clone()))
            .await;
        let Some(record) = self.registry().team(team) else {
            return;
        };
        let notice = Notice {
            from: &spent.agent_id,
            kind: "budget_exhausted",
            details: serde_json::to_value(&spent).unwrap_or_default(),
            text: format!(
                "Budget: a send by {} was refused — {} ({} per {}) is spent{}.",
                spent.agent_id,
                spent.budget.as_str(),
                spent.limit,
                per(spent.window_seconds),
                spent
                    .thread_id
                    .as_deref()
                    .map(|t| format!(" in thread {t}"))
                    .unwrap_or_default()
            ),
            thread: format!("budget:{}", spent.budget.as_str()),
        };
        if let Err(err) = self.notify_supervisor(&record, notice).await {
            tracing::warn!(error = %err, "the supervisor could not be told of a spent budget");
        }
    }
}

fn per(window_seconds: i64) -> &'static str {
    if window_seconds == 60 {
        "minute"
    } else {
        "day"
    }
}

/// `RATE_LIMITED` with the spent budget as details (`retry_after_ms` becomes the
/// `Retry-After` header).
fn refusal(spent: &BudgetExhausted) -> CoreError {
    let message = format!(
        "the team's {} budget ({} per {}) is spent; it is whole again in {} s",
        spent.budget.as_str(),
        spent.limit,
        per(spent.window_seconds),
        spent.retry_after_ms / 1000
    );
    let mut error = CoreError::new(ErrorCode::RateLimited, message).suggest(
        "Wait for Retry-After before sending again; ask the team owner if the budget is too low.",
    );
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(spent) {
        for (key, value) in fields {
            error = error.with(&key, value);
        }
    }
    error
}
