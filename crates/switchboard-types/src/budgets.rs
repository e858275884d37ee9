//! Budgets: how many messages and tasks a team, an agent and a thread may start per
//! minute and per day.
//!
//! The loop guard stops a chain that is too long or goes round in circles; a budget stops
//! what the guard cannot see — an agent that sends new work on and on, or a thread that
//! eats a team's day. The operator sets ceilings (`--budget`), a team key may set lower
//! ones (`PATCH /v1/teams/{team_id}` with `budgets`); a send past the lower of the two is
//! refused with `RATE_LIMITED` and `Retry-After` at the end of the window. Counted in the
//! database, so every node of a deployment spends from the same count
//! (`docs/loop-guard.md`).

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::AgentId;

/// Highest budget anyone may set (a limit above it is no limit).
pub const MAX_BUDGET: u32 = 1_000_000_000;

/// Limits per fixed window (a minute, or a UTC day); `null`: no limit at this level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Budgets {
    /// Messages (sends, broadcasts, responses, assistance requests, publishes) by all
    /// members together.
    #[cfg_attr(feature = "openapi", schema(example = 600, minimum = 1))]
    pub team_messages_per_minute: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub team_messages_per_day: Option<u32>,
    /// Tasks submitted by all members together.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub team_tasks_per_minute: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub team_tasks_per_day: Option<u32>,
    /// Messages sent by any one agent.
    #[cfg_attr(feature = "openapi", schema(example = 60, minimum = 1))]
    pub agent_messages_per_minute: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub agent_messages_per_day: Option<u32>,
    /// Tasks submitted by any one agent.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub agent_tasks_per_minute: Option<u32>,
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub agent_tasks_per_day: Option<u32>,
    /// Messages in any one thread (`thread_id`), whoever sends them: one runaway
    /// conversation cannot eat the team's day.
    #[cfg_attr(feature = "openapi", schema(example = 500, minimum = 1))]
    pub thread_messages_per_day: Option<u32>,
}

/// One budget of [`Budgets`], by the name its field, its flag and its refusal use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Budget {
    TeamMessagesPerMinute,
    TeamMessagesPerDay,
    TeamTasksPerMinute,
    TeamTasksPerDay,
    AgentMessagesPerMinute,
    AgentMessagesPerDay,
    AgentTasksPerMinute,
    AgentTasksPerDay,
    ThreadMessagesPerDay,
}

/// Who a budget counts for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetScope {
    Team,
    Agent,
    Thread,
}

impl Budget {
    pub const ALL: [Budget; 9] = [
        Budget::TeamMessagesPerMinute,
        Budget::TeamMessagesPerDay,
        Budget::TeamTasksPerMinute,
        Budget::TeamTasksPerDay,
        Budget::AgentMessagesPerMinute,
        Budget::AgentMessagesPerDay,
        Budget::AgentTasksPerMinute,
        Budget::AgentTasksPerDay,
        Budget::ThreadMessagesPerDay,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Budget::TeamMessagesPerMinute => "team_messages_per_minute",
            Budget::TeamMessagesPerDay => "team_messages_per_day",
            Budget::TeamTasksPerMinute => "team_tasks_per_minute",
            Budget::TeamTasksPerDay => "team_tasks_per_day",
            Budget::AgentMessagesPerMinute => "agent_messages_per_minute",
            Budget::AgentMessagesPerDay => "agent_messages_per_day",
            Budget::AgentTasksPerMinute => "agent_tasks_per_minute",
            Budget::AgentTasksPerDay => "agent_tasks_per_day",
            Budget::ThreadMessagesPerDay => "thread_messages_per_day",
        }
    }

    /// The budget of this name.
    pub fn named(name: &str) -> Option<Budget> {
        Budget::ALL.into_iter().find(|b| b.as_str() == name)
    }

    /// The window's length in seconds: a minute, or a (UTC) day.
    pub fn window_seconds(self) -> i64 {
        if self.as_str().ends_with("_per_minute") {
            60
        } else {
            86_400
        }
    }

    /// Whether it counts tasks (otherwise messages).
    pub fn counts_tasks(self) -> bool {
        self.as_str().contains("_tasks_")
    }

    pub fn scope(self) -> BudgetScope {
        match self.as_str().split('_').next() {
            Some("team") => BudgetScope::Team,
            Some("agent") => BudgetScope::Agent,
            _ => BudgetScope::Thread,
        }
    }
}

impl Budgets {
    /// The limit of one budget.
    pub fn get(&self, budget: Budget) -> Option<u32> {
        *self.field(budget)
    }

    /// Sets one budget.
    pub fn set(&mut self, budget: Budget, limit: Option<u32>) {
        *self.field_mut(budget) = limit;
    }

    fn field(&self, budget: Budget) -> &Option<u32> {
        match budget {
            Budget::TeamMessagesPerMinute => &self.team_messages_per_minute,
            Budget::TeamMessagesPerDay => &self.team_messages_per_day,
            Budget::TeamTasksPerMinute => &self.team_tasks_per_minute,
            Budget::TeamTasksPerDay => &self.team_tasks_per_day,
            Budget::AgentMessagesPerMinute => &self.agent_messages_per_minute,
            Budget::AgentMessagesPerDay => &self.agent_messages_per_day,
            Budget::AgentTasksPerMinute => &self.agent_tasks_per_minute,
            Budget::AgentTasksPerDay => &self.agent_tasks_per_day,
            Budget::ThreadMessagesPerDay => &self.thread_messages_per_day,
        }
    }

    fn field_mut(&mut self, budget: Budget) -> &mut Option<u32> {
        match budget {
            Budget::TeamMessagesPerMinute => &mut self.team_messages_per_minute,
            Budget::TeamMessagesPerDay => &mut self.team_messages_per_day,
            Budget::TeamTasksPerMinute => &mut self.team_tasks_per_minute,
            Budget::TeamTasksPerDay => &mut self.team_tasks_per_day,
            Budget::AgentMessagesPerMinute => &mut self.agent_messages_per_minute,
            Budget::AgentMessagesPerDay => &mut self.agent_messages_per_day,
            Budget::AgentTasksPerMinute => &mut self.agent_tasks_per_minute,
            Budget::AgentTasksPerDay => &mut self.agent_tasks_per_day,
            Budget::ThreadMessagesPerDay => &mut self.thread_messages_per_day,
        }
    }

    /// The budgets in force where `self` (a team's) meets `ceiling` (the operator's):
    /// the lower of each.
    pub fn within(&self, ceiling: &Budgets) -> Budgets {
        let mut out = Budgets::default();
        for budget in Budget::ALL {
            let limit = match (self.get(budget), ceiling.get(budget)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            out.set(budget, limit);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        Budget::ALL.iter().all(|b| self.get(*b).is_none())
    }

    /// Each limit from 1 to [`MAX_BUDGET`], and — for a team's — none above the
    /// operator's ceiling (a team may lower a budget, never raise it).
    pub fn validate(&self, ceiling: &Budgets) -> Result<(), ErrorBody> {
        for budget in Budget::ALL {
            let Some(limit) = self.get(budget) else {
                continue;
            };
            let field = format!("budgets.{}", budget.as_str());
            if !(1..=MAX_BUDGET).contains(&limit) {
                return Err(ErrorBody::validation(
                    &field,
                    format!("{field} must be from 1 to {MAX_BUDGET}, or null for no limit"),
                ));
            }
            if let Some(most) = ceiling.get(budget)
                && limit > most
            {
                return Err(ErrorBody::validation(
                    &field,
                    format!("{field} can be at most the server's ceiling, {most}"),
                ));
            }
        }
        Ok(())
    }
}

/// A send a budget refused: the `details` of its `RATE_LIMITED`, and what the team's
/// watchers and supervisor are told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BudgetExhausted {
    /// Which budget is spent.
    pub budget: Budget,
    /// Its limit per window.
    pub limit: u32,
    /// The window's length: 60 or 86400 seconds (a UTC day).
    pub window_seconds: i64,
    /// Until the window ends, when the budget is whole again.
    pub retry_after_ms: u64,
    /// The agent whose send was refused.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub agent_id: AgentId,
    /// The thread whose budget is spent (`thread_messages_per_day`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_windows_and_scopes_follow_the_field() {
        for budget in Budget::ALL {
            assert_eq!(Budget::named(budget.as_str()), Some(budget));
            let json = serde_json::to_value(budget).expect("json");
            assert_eq!(json, budget.as_str());
        }
        assert_eq!(Budget::AgentTasksPerMinute.window_seconds(), 60);
        assert_eq!(Budget::ThreadMessagesPerDay.window_seconds(), 86_400);
        assert!(Budget::TeamTasksPerDay.counts_tasks());
        assert!(!Budget::ThreadMessagesPerDay.counts_tasks());
        assert_eq!(Budget::ThreadMessagesPerDay.scope(), BudgetScope::Thread);
        assert_eq!(Budget::AgentMessagesPerDay.scope(), BudgetScope::Agent);
    }

    #[test]
    fn a_team_lowers_and_never_raises() {
        let ceiling = Budgets {
            agent_messages_per_minute: Some(10),
            ..Default::default()
        };
        let team = Budgets {
            agent_messages_per_minute: Some(5),
            thread_messages_per_day: Some(100),
            ..Default::default()
        };
        assert!(team.validate(&ceiling).is_ok());
        let in_force = team.within(&ceiling);
        assert_eq!(in_force.agent_messages_per_minute, Some(5));
        assert_eq!(in_force.thread_messages_per_day, Some(100));
        let raised = Budgets {
            agent_messages_per_minute: Some(11),
            ..Default::default()
        };
        let err = raised.validate(&ceiling).expect_err("above the ceiling");
        assert_eq!(err.details["field"], "budgets.agent_messages_per_minute");
        let zero = Budgets {
            team_tasks_per_day: Some(0),
            ..Default::default()
        };
        assert!(zero.validate(&Budgets::default()).is_err());
        assert_eq!(Budgets::default().within(&ceiling), ceiling);
    }
}
