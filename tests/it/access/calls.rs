//! The REST calls of the access matrix: the team and registry operations, and those
//! agents make (messages, tasks, publish), each with a body naming its party.

use reqwest::Method;
use serde_json::{Value, json};

use super::{FRAMES, Fixture};
use crate::support::Agent;

impl Fixture {
    /// The REST call of an approval operation; its party is the asker, `s`.
    fn approval_call(&self, op: &str) -> Option<(Method, String, Option<Value>, &Agent)> {
        let id = &self.approval;
        Some(match op {
            "request_approval" => (
                Method::POST,
                "/v1/approvals".into(),
                Some(json!({"summary": "x"})),
                &self.s,
            ),
            "list_approvals" => (Method::GET, "/v1/approvals".into(), None, &self.s),
            "search_messages" => (Method::GET, "/v1/search?q=fixture".into(), None, &self.s),
            "get_approval" => (Method::GET, format!("/v1/approvals/{id}"), None, &self.s),
            "decide_approval" => (
                Method::POST,
                format!("/v1/approvals/{id}/decision"),
                Some(json!({"decision": "deny"})),
                &self.s,
            ),
            _ => return None,
        })
    }

    /// The REST call of an operation: method, path, body, and its party.
    pub(super) fn call(&self, op: &str) -> (Method, String, Option<Value>, &Agent) {
        let (t, msg, clar) = (&self.team.id, &self.message, &self.clarification);
        let (s, r) = (&self.s, &self.r);
        let get = |path: String, party| (Method::GET, path, None, party);
        let post = |path: String, body: Value, party| (Method::POST, path, Some(body), party);
        if let Some(call) = self.approval_call(op) {
            return call;
        }
        match op {
            "healthz" | "readyz" => get(format!("/{op}"), s),
            "metrics_text" => get("/metrics".into(), s),
            "whoami" => get("/v1/whoami".into(), s),
            "create_team" => post(
                "/v1/teams".into(),
                json!({"name": "new", "team_id": format!("{t}-new")}),
                s,
            ),
            "get_team" => get(format!("/v1/teams/{t}"), s),
            "update_team" => (
                Method::PATCH,
                format!("/v1/teams/{t}"),
                Some(json!({"name": "renamed"})),
                s,
            ),
            "list_agents" => get(format!("/v1/teams/{t}/agents"), s),
            "register_agent" => post(
                format!("/v1/teams/{t}/agents"),
                json!({"agent_id": "new", "role": "r", "capabilities": []}),
                s,
            ),
            "register_remote_agent" => post(
                format!("/v1/teams/{t}/a2a-agents"),
                json!({"card_url": "ftp://example.com/card.json"}),
                s,
            ),
            "get_agent" => get(format!("/v1/teams/{t}/agents/r"), r),
            "update_agent" => (
                Method::PATCH,
                format!("/v1/teams/{t}/agents/r"),
                Some(json!({"status": "busy"})),
                r,
            ),
            "remove_agent" => (Method::DELETE, format!("/v1/teams/{t}/agents/r"), None, r),
            "rotate_agent_token" => post(format!("/v1/teams/{t}/agents/r/token"), json!({}), r),
            "rotate_team_key" => post(format!("/v1/teams/{t}/key"), json!({}), s),
            "list_teams" => get("/v1/teams".to_owned(), s),
            "get_callback_secret" => get(format!("/v1/teams/{t}/callback-secret"), s),
            "rotate_callback_secret" => {
                post(format!("/v1/teams/{t}/callback-secret"), json!({}), s)
            }
            "team_metrics" => get(format!("/v1/teams/{t}/metrics"), s),
            "activity" => get(format!("/v1/teams/{t}/activity"), s),
            "team_messages" => get(format!("/v1/teams/{t}/messages"), s),
            "team_tasks" => get(format!("/v1/teams/{t}/tasks"), s),
            "acquire_lease" => (
                Method::PUT,
                format!("/v1/teams/{t}/leases"),
                Some(json!({"resource": "docs/*.md"})),
                s,
            ),
            "list_leases" => get(format!("/v1/teams/{t}/leases"), s),
            "extend_lease" => post(
                format!("/v1/teams/{t}/leases/{}/extend", self.lease),
                json!({"ttl_seconds": 60}),
                s,
            ),
            "release_lease" => (
                Method::DELETE,
                format!("/v1/teams/{t}/leases/{}", self.lease),
                None,
                s,
            ),
            "connect" => get("/v1/ws".into(), s),
            "stomp_over_websocket" => get("/v1/stomp".into(), s),
            _ => self.agent_call(op, msg, clar),
        }
    }

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
            "request_approval" => json!({"summary": "x"}),
            "list_approvals" => json!({}),
            "search_messages" => json!({"q": "fixture"}),
            "get_approval" => json!({"approval_id": self.approval}),
            "decide_approval" => json!({"approval_id": self.approval, "decision": "deny"}),
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
