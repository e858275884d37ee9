//! The REST calls agents make in the access matrix (messages, tasks, publish), each
//! with a body naming its party.

use reqwest::Method;
use serde_json::{Value, json};

use super::{FRAMES, Fixture};
use crate::support::Agent;

impl Fixture {
    /// The calls agents make (messages and tasks), with their bodies naming the party.
    pub(super) fn agent_call(
        &self,
        op: &str,
        msg: &str,
        clar: &str,
    ) -> (Method, String, Option<Value>, &Agent) {
        let (s, r) = (&self.s, &self.r);
        let get = |path: String, party| (Method::GET, path, None, party);
        let post =
            |path: &str, body: Value, party| (Method::POST, path.to_owned(), Some(body), party);
        match op {
            "send_message" => post(
                "/v1/messages",
                json!({"sender_agent_id": "s", "recipient_agent_ids": ["r"], "message_type": "information", "content": {"text": "hi"}}),
                s,
            ),
            "get_messages" => get("/v1/messages".into(), r),
            "get_message" => get(format!("/v1/messages/{msg}"), r),
            "get_trace" => get(format!("/v1/traces/{}", msg.trim_start_matches("msg_")), r),
            "mark_read" => post(
                "/v1/messages/read",
                json!({"agent_id": "r", "message_ids": [msg]}),
                r,
            ),
            "respond" => post(
                &format!("/v1/messages/{msg}/responses"),
                json!({"responder_agent_id": "r", "response_content": {"text": "ok", "status": "completed"}}),
                r,
            ),
            "broadcast" => post(
                "/v1/broadcasts",
                json!({"sender_agent_id": "s", "update_type": "progress", "urgency": "info", "content": {"summary": "s"}}),
                s,
            ),
            "request_assistance" => post(
                "/v1/assistance-requests",
                json!({"requester_agent_id": "s", "assistance_type": "review", "required_capabilities": [], "request_details": {"description": "d"}}),
                s,
            ),
            "publish" => post(
                "/v1/publish",
                json!({"sender_agent_id": "s", "cause_by": "Tag", "content": {"text": "hi"}}),
                s,
            ),
            "set_watch" => (
                Method::PUT,
                "/v1/watch".to_owned(),
                Some(json!({"agent_id": "r", "watch": ["Tag"]})),
                r,
            ),
            "own_activity" => get("/v1/activity".into(), r),
            other => self.task_call(other, clar),
        }
    }

    /// The task calls (`agent_call`'s rest).
    fn task_call(&self, op: &str, clar: &str) -> (Method, String, Option<Value>, &Agent) {
        let (s, r) = (&self.s, &self.r);
        let get = |path: String, party| (Method::GET, path, None, party);
        let post =
            |path: &str, body: Value, party| (Method::POST, path.to_owned(), Some(body), party);
        match op {
            "submit_task" => post(
                "/v1/tasks",
                json!({"description": "d", "originating_agent_id": "s", "target_agent_id": "r"}),
                s,
            ),
            "list_tasks" => get("/v1/tasks".into(), r),
            "get_task" => get("/v1/tasks/t1".into(), r),
            "cancel" => post("/v1/tasks/t1/cancel", json!({}), s),
            "clarify" => post(
                "/v1/tasks/t1/clarifications",
                json!({"question": "how?"}),
                r,
            ),
            "answer" => post(
                &format!("/v1/tasks/t2/clarifications/{clar}/answer"),
                json!({"answer": "so"}),
                s,
            ),
            "handoff" => post(
                "/v1/tasks/t1/handoff",
                json!({"new_agent_id": "m", "reason": "m knows"}),
                r,
            ),
            "report" => post("/v1/tasks/t1/result", json!({"status": "success"}), r),
            "claim" => post("/v1/tasks/claim", json!({}), r),
            "release" => post("/v1/tasks/t3/release", json!({}), r),
            "extend" => post("/v1/tasks/t3/extend", json!({}), r),
            other => panic!("no call for operation {other}: add it to the access test"),
        }
    }

    /// The frame for a WebSocket operation, naming the party as the REST body does.
    pub(super) fn frame(&self, kind: &str) -> Value {
        let (msg, clar) = (&self.message, &self.clarification);
        match kind {
            "whoami" | "get_messages" | "list_tasks" => json!({}),
            "get_message" => json!({"message_id": msg}),
            // The fixture's message started a trace: its id names it.
            "get_trace" => json!({"trace_id": msg.trim_start_matches("msg_")}),
            "mark_message_read" => json!({"agent_id": "r", "message_ids": [msg]}),
            "respond_to_message" => {
                json!({"original_message_id": msg, "responder_agent_id": "r", "response_content": {"text": "ok", "status": "completed"}})
            }
            "get_task" => json!({"task_id": "t1"}),
            "cancel_task" => json!({"task_id": "t1"}),
            "ClarificationRequest" => {
                json!({"task_id": "t1", "requested_by": "r", "question": "how?"})
            }
            "ClarificationResponse" => {
                json!({"task_id": "t2", "clarification_id": clar, "response_provided_by": "s", "answer": "so"})
            }
            "HandoffNotification" => {
                json!({"task_id": "t1", "current_agent_id": "r", "new_agent_id": "m", "reason": "m knows"})
            }
            "TaskResponse" => json!({"task_id": "t1", "agent_id": "r", "status": "success"}),
            "CallbackNotification" => {
                json!({"task_id": "t1", "status": "complete", "result_data": {}})
            }
            "ErrorMessage" => {
                json!({"task_id": "t1", "error_message": "broke", "originating_agent_id": "r"})
            }
            // The team is named, so that another team's agent is refused for the team
            // (as on REST), not told the lease is unknown in its own.
            "acquire_lease" => json!({"team_id": self.team.id, "resource": "docs/*.md"}),
            "list_leases" => json!({"team_id": self.team.id}),
            "extend_lease" => json!({"team_id": self.team.id, "lease_id": self.lease}),
            "release_lease" => json!({"team_id": self.team.id, "lease_id": self.lease}),
            "claim_task" => json!({}),
            "release_task" => json!({"task_id": "t3"}),
            "extend_claim" => json!({"task_id": "t3"}),
            _ => {
                let rest = FRAMES.iter().find(|(f, ..)| *f == kind).map(|(_, r, _)| *r);
                let (_, _, body, _) = self.agent_call(rest.unwrap_or(kind), msg, clar);
                body.unwrap_or_else(|| json!({}))
            }
        }
    }
}
