//! Which message a Wise Agents reply answers.
//!
//! A Wise agent answers a request by sending a new `WiseAgentMessage` to the
//! requester's response queue; the versions in use send no `_chat_id` back, so nothing
//! in the body names the request. A broker has nothing to link, but we do: the request
//! the replier was last handed on its request queue by that requester. A reply to a
//! message that came from another transport (REST, the WebSocket, MCP, A2A) is then
//! stored as its response — `in_reply_to`, the original's responses, its thread —
//! instead of a loose message in a new thread.
//!
//! Kept in memory, per server: after a restart, or when the request was handed out by
//! another node, a reply goes in as before, unlinked. Requests between Wise agents are
//! not linked: Wise Agents follow their own conversations through their contexts, and
//! a chain of links across a long coordination would count against the loop guard's
//! hops for what is one conversation to them.

use std::collections::HashMap;
use std::sync::Mutex;

use switchboard_types::ids::{AgentId, AgentPk, MessageId};

/// Requests remembered at most; past that the book starts again (a reply to a request
/// forgotten this way goes in unlinked, as after a restart).
const MAX_REMEMBERED: usize = 65_536;

/// A request handed to a Wise agent, which its next reply to the requester answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub message_id: MessageId,
    /// Whether the request wants a response: the reply is then RESPOND_TO_MESSAGE.
    pub requires_response: bool,
}

/// The last request each Wise agent was handed by each requester.
#[derive(Default)]
pub struct Replies {
    asked: Mutex<HashMap<(AgentPk, AgentId), Asked>>,
}

impl Replies {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(AgentPk, AgentId), Asked>> {
        // Only plain values inside: a panic elsewhere leaves nothing half-done.
        self.asked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `replier` was handed `asked` from `requester`.
    pub fn handed(&self, replier: AgentPk, requester: &AgentId, asked: Asked) {
        let mut book = self.lock();
        if book.len() >= MAX_REMEMBERED {
            book.clear();
        }
        book.insert((replier, requester.clone()), asked);
    }

    /// The request a reply from `replier` to `requester` answers, once: a second reply
    /// goes in as a message in the same thread.
    pub fn answered(&self, replier: AgentPk, requester: &AgentId) -> Option<Asked> {
        self.lock().remove(&(replier, requester.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_answers_the_last_request_of_its_requester_once() {
        let replies = Replies::default();
        let asked = |id: &str| Asked {
            message_id: MessageId::from(id),
            requires_response: true,
        };
        replies.handed(AgentPk(1), &AgentId::from("planner"), asked("m1"));
        replies.handed(AgentPk(1), &AgentId::from("planner"), asked("m2"));
        replies.handed(AgentPk(1), &AgentId::from("coder"), asked("m3"));
        assert_eq!(
            replies.answered(AgentPk(1), &AgentId::from("planner")),
            Some(asked("m2"))
        );
        assert_eq!(
            replies.answered(AgentPk(1), &AgentId::from("planner")),
            None
        );
        assert_eq!(replies.answered(AgentPk(2), &AgentId::from("coder")), None);
        assert_eq!(
            replies.answered(AgentPk(1), &AgentId::from("coder")),
            Some(asked("m3"))
        );
    }
}
