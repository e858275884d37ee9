//! The task state machine: which party may do what in which state, and where it leads.
//!
//! Pure and synchronous on purpose: every rule of a task's life is here, tested here,
//! and the operations only apply what [`TaskState::apply`] decided. A refused action
//! says why and changes nothing.

use crate::ids::ClarificationId;
use serde::{Deserialize, Serialize};

/// Where a task is in its life.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "kebab-case")]
#[strum(serialize_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum TaskStatus {
    /// Offered to a role (`assignee_role`), waiting for one of its agents to claim it.
    Open,
    /// Assigned and being worked on.
    InProgress,
    /// The assignee asked a question; waiting for the originator's answer.
    InputRequired,
    Success,
    Failed,
    Canceled,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// A finished task accepts nothing any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskStatus::Success | TaskStatus::Failed | TaskStatus::Canceled
        )
    }
}

/// How the caller relates to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Party {
    pub originator: bool,
    pub assignee: bool,
    /// The caller may claim the task: of its role, with a capability it asks for.
    pub claimant: bool,
}

/// What someone wants to do to a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The assignee asks the originator a question.
    Clarify,
    /// The originator answers the open question `clarification_id`.
    Answer { clarification_id: ClarificationId },
    /// The assignee or the originator gives the task to someone else.
    Handoff,
    /// The assignee reports that work goes on.
    Progress,
    /// The assignee reports the end: success or failure.
    Finish { success: bool },
    /// The originator calls the task off.
    Cancel,
    /// An agent of the task's role takes the open task.
    Claim,
    /// The assignee of a claimed task gives it back (or its lease ran out): open again.
    Release,
}

impl Action {
    /// Whether `party` may do this, and who may (for the refusal's text).
    fn who_may(&self, party: Party) -> (bool, &'static str) {
        match self {
            Action::Clarify | Action::Progress | Action::Finish { .. } => {
                (party.assignee, "the task's assignee")
            }
            Action::Answer { .. } | Action::Cancel => (party.originator, "the task's originator"),
            Action::Handoff => (
                party.assignee || party.originator,
                "the task's assignee or originator",
            ),
            Action::Claim => (party.claimant, "an agent of the task's role"),
            Action::Release => (party.assignee, "the task's assignee"),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Action::Clarify => "ask for clarification",
            Action::Answer { .. } => "answer a clarification",
            Action::Handoff => "hand off",
            Action::Progress => "report progress",
            Action::Finish { .. } => "report a result",
            Action::Cancel => "cancel",
            Action::Claim => "be claimed",
            Action::Release => "be given back",
        }
    }
}

/// The part of a task the rules look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskState {
    pub status: TaskStatus,
    /// The open question while `status` is input-required.
    pub clarification_id: Option<ClarificationId>,
    /// Offered to a role: it can be claimed while open and given back once claimed.
    pub offered: bool,
}

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The caller is not the party that may do this (`FORBIDDEN`).
    NotYourRole(String),
    /// The task's state does not allow it (`INVALID_TASK_TRANSITION`).
    WrongState(String),
}

impl TaskState {
    /// The state after `party` does `action`, or why it may not.
    ///
    /// `new_clarification_id` is the id a [`Action::Clarify`] opens (chosen by the
    /// caller so it can be returned and stored).
    pub fn apply(
        &self,
        party: Party,
        action: &Action,
        new_clarification_id: Option<&ClarificationId>,
    ) -> Result<TaskState, Refusal> {
        let (allowed, who) = action.who_may(party);
        if !allowed {
            return Err(Refusal::NotYourRole(format!(
                "only {who} may {}",
                action.name()
            )));
        }
        if self.status.is_final() {
            return Err(Refusal::WrongState(format!(
                "the task is already {}; it cannot {} any more",
                self.status.as_str(),
                action.name()
            )));
        }
        self.transition(action, new_clarification_id)
    }

    /// Where an open task goes when its rightful party does `action`.
    fn transition(
        &self,
        action: &Action,
        new_clarification_id: Option<&ClarificationId>,
    ) -> Result<TaskState, Refusal> {
        let next = |status, clarification_id: Option<ClarificationId>| {
            Ok(TaskState {
                status,
                clarification_id,
                offered: self.offered,
            })
        };
        match (self.status, action) {
            (TaskStatus::Open, Action::Claim) => next(TaskStatus::InProgress, None),
            (_, Action::Claim) => Err(Refusal::WrongState(format!(
                "the task is {}: only an open task can be claimed",
                self.status.as_str()
            ))),
            (TaskStatus::InProgress | TaskStatus::InputRequired, Action::Release)
                if self.offered =>
            {
                next(TaskStatus::Open, None)
            }
            (_, Action::Release) if !self.offered => Err(Refusal::WrongState(
                "only a task offered to a role can be given back; hand it off instead".into(),
            )),
            // An open task is nobody's yet: only its originator may act on it (hand it
            // to a named agent, or cancel it).
            (TaskStatus::Open, Action::Handoff) => next(TaskStatus::InProgress, None),
            (TaskStatus::Open, Action::Cancel) => next(TaskStatus::Canceled, None),
            (TaskStatus::Open, action) => Err(Refusal::WrongState(format!(
                "the task is open (not claimed yet); it cannot {}",
                action.name()
            ))),
            (TaskStatus::InProgress, Action::Clarify) => {
                next(TaskStatus::InputRequired, new_clarification_id.cloned())
            }
            (TaskStatus::InputRequired, Action::Clarify) => Err(Refusal::WrongState(
                "a question is already open; wait for its answer".into(),
            )),
            (TaskStatus::InputRequired, Action::Answer { clarification_id }) => {
                if self.clarification_id.as_deref() == Some(clarification_id.as_str()) {
                    next(TaskStatus::InProgress, None)
                } else {
                    Err(Refusal::WrongState(format!(
                        "clarification '{clarification_id}' is not the open question of this task"
                    )))
                }
            }
            (TaskStatus::InProgress, Action::Answer { clarification_id }) => {
                Err(Refusal::WrongState(format!(
                    "no question is open (clarification '{clarification_id}' was never asked or is already answered)"
                )))
            }
            // A handoff drops an open question: the new assignee asks its own.
            (_, Action::Handoff) => next(TaskStatus::InProgress, None),
            (TaskStatus::InProgress, Action::Progress) => next(TaskStatus::InProgress, None),
            (TaskStatus::InputRequired, Action::Progress) => Err(Refusal::WrongState(
                "the task waits for an answer to its open question".into(),
            )),
            (_, Action::Finish { success }) => next(
                if *success {
                    TaskStatus::Success
                } else {
                    TaskStatus::Failed
                },
                None,
            ),
            (_, Action::Cancel) => next(TaskStatus::Canceled, None),
            (status, action) => Err(Refusal::WrongState(format!(
                "a task that is {} cannot {}",
                status.as_str(),
                action.name()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORIGINATOR: Party = Party {
        originator: true,
        assignee: false,
        claimant: false,
    };
    const ASSIGNEE: Party = Party {
        originator: false,
        assignee: true,
        claimant: false,
    };
    const STRANGER: Party = Party {
        originator: false,
        assignee: false,
        claimant: false,
    };
    const CLAIMANT: Party = Party {
        originator: false,
        assignee: false,
        claimant: true,
    };

    fn state(status: TaskStatus) -> TaskState {
        TaskState {
            status,
            clarification_id: (status == TaskStatus::InputRequired).then(|| "c1".into()),
            offered: false,
        }
    }

    fn answer(id: &str) -> Action {
        Action::Answer {
            clarification_id: id.into(),
        }
    }

    fn goes(from: TaskStatus, party: Party, action: Action) -> TaskStatus {
        state(from)
            .apply(party, &action, Some(&"c2".into()))
            .unwrap_or_else(|r| panic!("{from:?} {action:?}: {r:?}"))
            .status
    }

    fn wrong_state(from: TaskStatus, party: Party, action: Action) {
        let refused = state(from).apply(party, &action, Some(&"c2".into()));
        assert!(
            matches!(refused, Err(Refusal::WrongState(_))),
            "{from:?} {action:?}: {refused:?}"
        );
    }

    fn not_yours(from: TaskStatus, party: Party, action: Action) {
        let refused = state(from).apply(party, &action, Some(&"c2".into()));
        assert!(
            matches!(refused, Err(Refusal::NotYourRole(_))),
            "{from:?} {action:?}: {refused:?}"
        );
    }

    #[test]
    fn clarification_opens_and_the_matching_answer_closes_it() {
        let asked = state(TaskStatus::InProgress)
            .apply(ASSIGNEE, &Action::Clarify, Some(&"c9".into()))
            .expect("clarify");
        assert_eq!(asked.status, TaskStatus::InputRequired);
        assert_eq!(asked.clarification_id.as_deref(), Some("c9"));
        let answered = asked
            .apply(ORIGINATOR, &answer("c9"), None)
            .expect("answer");
        assert_eq!(answered, state(TaskStatus::InProgress));
        // A second round works the same way.
        assert_eq!(
            goes(TaskStatus::InProgress, ASSIGNEE, Action::Clarify),
            TaskStatus::InputRequired
        );
    }

    #[test]
    fn answers_must_match_an_open_question() {
        wrong_state(TaskStatus::InProgress, ORIGINATOR, answer("c1"));
        wrong_state(TaskStatus::InputRequired, ORIGINATOR, answer("other"));
        wrong_state(TaskStatus::InputRequired, ASSIGNEE, Action::Clarify);
        wrong_state(TaskStatus::InputRequired, ASSIGNEE, Action::Progress);
    }

    #[test]
    fn progress_handoff_finish_and_cancel_from_open_states() {
        use TaskStatus::*;
        assert_eq!(goes(InProgress, ASSIGNEE, Action::Progress), InProgress);
        assert_eq!(goes(InProgress, ASSIGNEE, Action::Handoff), InProgress);
        assert_eq!(goes(InProgress, ORIGINATOR, Action::Handoff), InProgress);
        let handed = state(InputRequired)
            .apply(ASSIGNEE, &Action::Handoff, None)
            .expect("handoff");
        assert_eq!(
            handed,
            state(InProgress),
            "a handoff drops the open question"
        );
        for from in [InProgress, InputRequired] {
            assert_eq!(
                goes(from, ASSIGNEE, Action::Finish { success: true }),
                Success
            );
            assert_eq!(
                goes(from, ASSIGNEE, Action::Finish { success: false }),
                Failed
            );
            assert_eq!(goes(from, ORIGINATOR, Action::Cancel), Canceled);
        }
    }

    #[test]
    fn finished_tasks_refuse_everything() {
        use TaskStatus::*;
        let both = Party {
            originator: true,
            assignee: true,
            claimant: true,
        };
        for from in [Success, Failed, Canceled] {
            for action in [
                Action::Clarify,
                answer("c1"),
                Action::Handoff,
                Action::Progress,
                Action::Finish { success: true },
                Action::Finish { success: false },
                Action::Cancel,
                Action::Claim,
                Action::Release,
            ] {
                let refused = offered(from).apply(both, &action, None);
                assert!(
                    matches!(refused, Err(Refusal::WrongState(_))),
                    "{from:?} {action:?}"
                );
                wrong_state(from, both, action);
            }
        }
    }

    #[test]
    fn each_action_belongs_to_its_party() {
        use TaskStatus::*;
        not_yours(InProgress, ORIGINATOR, Action::Clarify);
        not_yours(InProgress, ORIGINATOR, Action::Progress);
        not_yours(InProgress, ORIGINATOR, Action::Finish { success: true });
        not_yours(InputRequired, ASSIGNEE, answer("c1"));
        not_yours(InProgress, ASSIGNEE, Action::Cancel);
        for action in [
            Action::Clarify,
            answer("c1"),
            Action::Handoff,
            Action::Progress,
            Action::Finish { success: true },
            Action::Cancel,
        ] {
            not_yours(InProgress, STRANGER, action);
        }
        // The role is checked before the state: a stranger learns nothing of it.
        not_yours(Success, STRANGER, Action::Handoff);
    }

    #[test]
    fn statuses_round_trip_through_text() {
        use strum::VariantArray;
        for &s in TaskStatus::VARIANTS {
            assert_eq!(s.as_str().parse::<TaskStatus>(), Ok(s));
            assert_eq!(
                serde_json::to_value(s).expect("json"),
                serde_json::json!(s.as_str())
            );
        }
        assert!("done".parse::<TaskStatus>().is_err());
    }

    fn offered(status: TaskStatus) -> TaskState {
        TaskState {
            offered: true,
            ..state(status)
        }
    }

    #[test]
    fn an_offered_task_is_claimed_given_back_and_claimed_again() {
        use TaskStatus::*;
        let claimed = offered(Open)
            .apply(CLAIMANT, &Action::Claim, None)
            .expect("claim");
        assert_eq!(claimed, offered(InProgress));
        let back = claimed
            .apply(ASSIGNEE, &Action::Release, None)
            .expect("release");
        assert_eq!(back, offered(Open));
        let asked = offered(InputRequired);
        assert_eq!(
            asked
                .apply(ASSIGNEE, &Action::Release, None)
                .map(|s| s.status),
            Ok(Open)
        );
    }

    #[test]
    fn only_open_tasks_are_claimed_and_only_offered_ones_given_back() {
        use TaskStatus::*;
        for status in [InProgress, InputRequired, Success, Failed, Canceled] {
            let refused = offered(status).apply(CLAIMANT, &Action::Claim, None);
            assert!(matches!(refused, Err(Refusal::WrongState(_))), "{status:?}");
        }
        // A task given to a named agent is handed off, not given back.
        wrong_state(InProgress, ASSIGNEE, Action::Release);
        // Claiming is for the role's agents; giving back for the one that claimed.
        let refused = offered(Open).apply(STRANGER, &Action::Claim, None);
        assert!(matches!(refused, Err(Refusal::NotYourRole(_))));
        let refused = offered(InProgress).apply(CLAIMANT, &Action::Release, None);
        assert!(matches!(refused, Err(Refusal::NotYourRole(_))));
    }

    #[test]
    fn an_open_task_is_only_handed_off_or_canceled_by_its_originator() {
        use TaskStatus::*;
        let open = offered(Open);
        let goes_to = |party, action: Action| open.apply(party, &action, None).map(|s| s.status);
        assert_eq!(goes_to(ORIGINATOR, Action::Handoff), Ok(InProgress));
        assert_eq!(goes_to(ORIGINATOR, Action::Cancel), Ok(Canceled));
        for action in [
            Action::Progress,
            Action::Clarify,
            Action::Finish { success: true },
        ] {
            let refused = open.apply(ASSIGNEE, &action, None);
            assert!(matches!(refused, Err(Refusal::WrongState(_))), "{action:?}");
        }
    }
}
