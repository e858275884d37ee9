//! Who may do what: every operation of the OpenAPI document, and every operation frame
//! of the WebSocket, tried by every kind of caller, against one table.
//!
//! The table is the access policy written down. A new operation without a row fails
//! `every_documented_operation_has_a_row`; a changed rule fails the matrix test with the
//! whole observed table printed, so the difference is one diff away.

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{ADMIN, Agent, Team, TestApp};

mod calls;

/// The kinds of caller, in the order of the table's columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Admin,
    /// The key of the team the resource belongs to.
    OwnKey,
    /// The key of another team.
    OtherKey,
    /// The agent the resource is about: the sender, the recipient, the originator or
    /// the assignee the operation is for, or the agent itself.
    Party,
    /// Another agent of the same team, naming the party where the body names an agent.
    Member,
    /// An agent of another team, likewise.
    Outsider,
    /// The token of an agent that was removed.
    Removed,
    NoToken,
    Malformed,
}

const CALLERS: [Who; 9] = [
    Who::Admin,
    Who::OwnKey,
    Who::OtherKey,
    Who::Party,
    Who::Member,
    Who::Outsider,
    Who::Removed,
    Who::NoToken,
    Who::Malformed,
];

/// The outcome of one call, by status (the error code is checked to match it).
type Row = [u16; 9];

const PUBLIC: Row = [200; 9];
const EVERY_TOKEN: Row = [200, 200, 200, 200, 200, 200, 401, 401, 401];
const ADMIN_ONLY: Row = [201, 403, 403, 403, 403, 403, 401, 401, 401];
/// Anyone of the team reads; other teams' tokens are refused without saying whether
/// the team exists.
const TEAM_READ: Row = [200, 200, 403, 200, 200, 403, 401, 401, 401];
/// The team key (and the admin) manage; agents cannot.
const TEAM_MANAGE: Row = [200, 200, 403, 403, 403, 403, 401, 401, 401];
/// Done *as* the party: only its own token; acting as someone else is forbidden.
const AS_PARTY_201: Row = [403, 403, 403, 201, 403, 403, 401, 401, 401];
const AS_PARTY_200: Row = [403, 403, 403, 200, 403, 403, 401, 401, 401];
/// Any agent, on its own behalf (its own inbox, its own tasks).
const ANY_AGENT: Row = [403, 403, 403, 200, 200, 200, 401, 401, 401];
/// Read by its parties and by the team's key (the operator's view); to anyone else it
/// does not exist, and the admin token is not a reader of messages or tasks.
const PARTY_OR_KEY: Row = [403, 200, 404, 200, 404, 404, 401, 401, 401];
/// A message or task the caller is not party to does not exist for it.
const PARTY_ELSE_HIDDEN: Row = [403, 403, 403, 200, 404, 404, 401, 401, 401];
const PARTY_ELSE_HIDDEN_201: Row = [403, 403, 403, 201, 404, 404, 401, 401, 401];
/// The status a frame that names its acting agent gets from anyone else: refused before
/// the task is looked up (so it reveals nothing, see `hidden_and_missing_answer_alike`).
const CLAIM_REFUSED: u16 = 403;
/// Done as an agent of the team (its own lease): the keys are refused, they hold none.
const TEAM_AGENT: Row = [403, 403, 403, 200, 200, 403, 401, 401, 401];
/// A lease is released by its holder, or by the team key (or the admin) for anyone.
const HOLDER_OR_KEY: Row = [200, 200, 403, 200, 403, 403, 401, 401, 401];

/// Every REST operation (by `operationId`) and its row.
const MATRIX: &[(&str, Row)] = &[
    ("healthz", PUBLIC),
    ("readyz", PUBLIC),
    ("metrics_text", PUBLIC),
    ("whoami", EVERY_TOKEN),
    ("create_team", ADMIN_ONLY),
    ("list_teams", [200, 403, 403, 403, 403, 403, 401, 401, 401]),
    ("get_team", TEAM_READ),
    ("update_team", TEAM_MANAGE),
    ("list_agents", TEAM_READ),
    (
        "register_agent",
        [201, 201, 403, 403, 403, 403, 401, 401, 401],
    ),
    // Past the access check the card URL (not http) is refused: nothing is fetched for
    // a caller that may not register.
    (
        "register_remote_agent",
        [400, 400, 403, 403, 403, 403, 401, 401, 401],
    ),
    ("get_agent", TEAM_READ),
    // An agent may change itself (not its communication switch); the key anyone.
    (
        "update_agent",
        [200, 200, 403, 200, 403, 403, 401, 401, 401],
    ),
    ("remove_agent", TEAM_MANAGE),
    // An agent may give itself a new token; the key any agent of its team.
    (
        "rotate_agent_token",
        [200, 200, 403, 200, 403, 403, 401, 401, 401],
    ),
    ("rotate_team_key", TEAM_MANAGE),
    ("get_callback_secret", TEAM_MANAGE),
    ("rotate_callback_secret", TEAM_MANAGE),
    ("team_metrics", TEAM_READ),
    ("send_message", AS_PARTY_201),
    ("get_messages", ANY_AGENT),
    ("get_message", PARTY_OR_KEY),
    ("get_trace", PARTY_OR_KEY),
    ("mark_read", AS_PARTY_200),
    // The body names the responder: anyone else is refused before the message is
    // looked up, so the answer says nothing about it.
    ("respond", AS_PARTY_201),
    ("broadcast", AS_PARTY_201),
    ("request_assistance", AS_PARTY_201),
    ("publish", AS_PARTY_201),
    ("set_watch", AS_PARTY_200),
    ("activity", TEAM_READ),
    ("own_activity", ANY_AGENT),
    ("submit_task", AS_PARTY_201),
    ("list_tasks", ANY_AGENT),
    ("get_task", PARTY_OR_KEY),
    ("team_messages", TEAM_MANAGE),
    ("team_tasks", TEAM_MANAGE),
    ("cancel", PARTY_ELSE_HIDDEN),
    ("clarify", PARTY_ELSE_HIDDEN_201),
    ("answer", PARTY_ELSE_HIDDEN),
    ("handoff", PARTY_ELSE_HIDDEN),
    ("report", PARTY_ELSE_HIDDEN),
    ("acquire_lease", TEAM_AGENT),
    ("list_leases", TEAM_READ),
    ("extend_lease", AS_PARTY_200),
    ("release_lease", HOLDER_OR_KEY),
    // Any agent claims for itself (nothing offered to its role: `task: null`).
    ("claim", ANY_AGENT),
    // Any agent asks, for itself; keys list their own team's, agents what they asked.
    (
        "request_approval",
        [403, 403, 403, 201, 201, 201, 401, 401, 401],
    ),
    (
        "list_approvals",
        [403, 200, 200, 200, 200, 200, 401, 401, 401],
    ),
    ("get_approval", PARTY_OR_KEY),
    // Each key its own team's messages, each agent what it sent or received.
    (
        "search_messages",
        [403, 200, 200, 200, 200, 200, 401, 401, 401],
    ),
    // The key decides; the asker never decides its own; to others it does not exist.
    (
        "decide_approval",
        [403, 200, 404, 403, 404, 404, 401, 401, 401],
    ),
    ("release", PARTY_ELSE_HIDDEN),
    ("extend", PARTY_ELSE_HIDDEN),
    // The upgrade answers 101; a refusal is the HTTP error before it.
    ("connect", [403, 403, 403, 101, 101, 101, 401, 401, 401]),
    // STOMP authenticates in its CONNECT frame, not in the upgrade (tests/it/stomp).
    ("stomp_over_websocket", [101; 9]),
];

/// Each operation frame of the WebSocket, the REST operation whose rules it follows (the
/// agents' columns of that row must come back as the frame's answer too), and whether
/// the frame names its acting agent (`requested_by`, `agent_id`, …), which REST takes
/// from the token: such a frame from anyone but the party is `CLAIM_REFUSED`.
const FRAMES: &[(&str, &str, bool)] = &[
    ("whoami", "whoami", false),
    ("send_message", "send_message", false),
    ("get_messages", "get_messages", false),
    ("get_message", "get_message", false),
    ("get_trace", "get_trace", false),
    ("mark_message_read", "mark_read", false),
    ("respond_to_message", "respond", false),
    ("broadcast_update", "broadcast", false),
    ("request_assistance", "request_assistance", false),
    ("publish", "publish", false),
    ("set_watch", "set_watch", false),
    ("get_activity", "own_activity", false),
    ("TaskRequest", "submit_task", false),
    ("list_tasks", "list_tasks", false),
    ("get_task", "get_task", false),
    ("cancel_task", "cancel", false),
    ("ClarificationRequest", "clarify", true),
    ("ClarificationResponse", "answer", true),
    ("HandoffNotification", "handoff", false),
    ("TaskResponse", "report", true),
    ("CallbackNotification", "report", false),
    ("ErrorMessage", "report", true),
    ("acquire_lease", "acquire_lease", false),
    ("list_leases", "list_leases", false),
    ("extend_lease", "extend_lease", false),
    ("release_lease", "release_lease", false),
    ("claim_task", "claim", false),
    ("release_task", "release", false),
    ("extend_claim", "extend", false),
    ("search_messages", "search_messages", false),
    ("request_approval", "request_approval", false),
    ("list_approvals", "list_approvals", false),
    ("get_approval", "get_approval", false),
    ("decide_approval", "decide_approval", false),
];

/// A team `a…` with sender `s`, recipient `r`, bystander `m` and removed `x`; a team
/// `b…` with `z`. `s` sent `r` a message that wants an answer, and gave `r` task `t1`
/// and task `t2`, on which `r` has an open question, and offered `t3` to `r`'s role,
/// which `r` claimed; `s` holds lease `lease` on `fixture/**` and asked approval
/// `approval`.
struct Fixture {
    team: Team,
    other: Team,
    s: Agent,
    r: Agent,
    m: Agent,
    z: Agent,
    removed: String,
    message: String,
    clarification: String,
    lease: String,
    approval: String,
}

async fn fixture(app: &TestApp, n: usize) -> Fixture {
    let team = app.team(&format!("a{n}")).await;
    let other = app.team(&format!("b{n}")).await;
    let s = app.agent(&team, "s", &["plan"]).await;
    let r = app.agent(&team, "r", &["code"]).await;
    let m = app.agent(&team, "m", &["code"]).await;
    let x = app.agent(&team, "x", &[]).await;
    let z = app.agent(&other, "z", &[]).await;
    app.delete(&format!("/v1/teams/{}/agents/x", team.id))
        .token(&team.key)
        .send()
        .await
        .expect_status(200);
    let message = app
        .send_with(
            &s,
            json!({"recipient_agent_ids": ["r"], "requires_response": true}),
        )
        .await
        .expect_status(201)
        .str("message_id");
    for task in ["t1", "t2"] {
        app.post("/v1/tasks")
            .token(&s.token)
            .json(json!({"task_id": task, "description": "d", "originating_agent_id": "s", "target_agent_id": "r"}))
            .send()
            .await
            .expect_status(201);
    }
    app.post("/v1/tasks")
        .token(&s.token)
        .json(
            json!({"task_id": "t3", "description": "d", "originating_agent_id": "s",
                     "assignee_role": "role of r"}),
        )
        .send()
        .await
        .expect_status(201);
    let claimed = app
        .post("/v1/tasks/claim")
        .token(&r.token)
        .json(json!({}))
        .send()
        .await;
    assert_eq!(claimed.expect_status(200).body["task"]["task_id"], "t3");
    let asked = app
        .post("/v1/tasks/t2/clarifications")
        .token(&r.token)
        .json(json!({"question": "which?"}))
        .send()
        .await
        .expect_status(201);
    let clarification = asked.body["task"]["open_clarification"]["clarification_id"]
        .as_str()
        .expect("clarification id")
        .to_owned();
    let (lease, approval) = holds(app, &team, &s).await;
    Fixture {
        approval,
        team,
        other,
        s,
        r,
        m,
        z,
        removed: x.token,
        message,
        clarification,
        lease,
    }
}

/// What `s` holds and waits on: a lease on `fixture/**`, a pending approval.
async fn holds(app: &TestApp, team: &Team, s: &Agent) -> (String, String) {
    let lease = app
        .put(&format!("/v1/teams/{}/leases", team.id))
        .token(&s.token)
        .json(json!({"resource": "fixture/**"}))
        .send()
        .await
        .expect_status(200);
    let approval = app
        .post("/v1/approvals")
        .token(&s.token)
        .json(json!({"summary": "fixture"}))
        .send()
        .await
        .expect_status(201);
    let id = |res: &crate::support::Res, what: &str| {
        res.body[what][format!("{what}_id")]
            .as_str()
            .expect("an id")
            .to_owned()
    };
    (id(&lease, "lease"), id(&approval, "approval"))
}

impl Fixture {
    /// The token `who` calls with, for an operation whose party is `party`.
    fn token(&self, who: Who, party: &Agent) -> Option<String> {
        Some(match who {
            Who::Admin => ADMIN.to_owned(),
            Who::OwnKey => self.team.key.clone(),
            Who::OtherKey => self.other.key.clone(),
            Who::Party => party.token.clone(),
            // The bystander is never a party; for the bystander's own row it is `m`.
            Who::Member => self.m.token.clone(),
            Who::Outsider => self.z.token.clone(),
            Who::Removed => self.removed.clone(),
            Who::NoToken => return None,
            Who::Malformed => "sb_agent_not-a-token".to_owned(),
        })
    }

    /// The party of a frame: the party of its REST twin.
    fn frame_party(&self, kind: &str) -> &Agent {
        let rest = FRAMES
            .iter()
            .find(|(f, ..)| *f == kind)
            .map_or(kind, |(_, r, _)| *r);
        self.call(rest).3
    }
}

/// The status of one REST call (101 for an accepted WebSocket upgrade). A refusal's
/// body must be the contract's error body with the code that belongs to its status.
async fn status_of(app: &TestApp, fx: &Fixture, op: &str, who: Who) -> u16 {
    let (method, path, body, party) = fx.call(op);
    let token = fx.token(who, party);
    if op == "connect" || op == "stomp_over_websocket" {
        return match app.ws_connect(&path, token.as_deref()).await {
            Ok(_) => 101,
            Err((status, body)) => checked(status, &body, op, who),
        };
    }
    let mut req = app.req(method, &path);
    if let Some(token) = &token {
        req = req.token(token);
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    let res = req.send().await;
    checked(res.status, &res.body, op, who)
}

/// The error code each refusal status must carry.
fn checked(status: u16, body: &Value, op: &str, who: Who) -> u16 {
    let code = match status {
        401 => Some("UNAUTHORIZED"),
        403 => Some("FORBIDDEN"),
        404 => None, // the resource's own not-found code
        _ => return status,
    };
    let got = body["error_code"].as_str().unwrap_or_default();
    match code {
        Some(code) => assert_eq!(got, code, "{op} as {who:?}: {body}"),
        None => assert!(got.ends_with("NOT_FOUND"), "{op} as {who:?}: {body}"),
    }
    status
}

fn render(rows: &[(String, Row)]) -> String {
    rows.iter()
        .map(|(op, row)| format!("    (\"{op}\", {row:?}),"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every cell on a fresh pair of teams (so that one cell's change cannot decide the
/// next), all on one server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_answers_every_caller_as_the_table_says() {
    let app = TestApp::start().await;
    let mut observed = Vec::new();
    let mut n = 0;
    for (op, _) in MATRIX {
        let mut row = [0; 9];
        for (i, who) in CALLERS.iter().enumerate() {
            n += 1;
            let fx = fixture(&app, n).await;
            row[i] = status_of(&app, &fx, op, *who).await;
        }
        observed.push(((*op).to_owned(), row));
    }
    let expected: Vec<(String, Row)> = MATRIX
        .iter()
        .map(|(op, row)| ((*op).to_owned(), *row))
        .collect();
    assert!(
        observed == expected,
        "the access table and the server disagree; the server answered (columns {CALLERS:?}):\n{}",
        render(&observed)
    );
    app.stop().await;
}

/// The answer to one operation frame: 0 when the reply is ok, else the HTTP status of
/// the error the reply carries.
async fn frame_status(app: &TestApp, fx: &Fixture, kind: &str, who: Who) -> u16 {
    let me = match who {
        Who::Party => fx.frame_party(kind),
        Who::Member => &fx.m,
        Who::Outsider => &fx.z,
        other => panic!("{other:?} cannot hold a socket"),
    };
    let mut ws = app.ws(me, "").await;
    let reply = ws.call(kind, fx.frame(kind)).await;
    if reply["ok"] == true {
        return 0;
    }
    let code = reply["error"]["error_code"].as_str().unwrap_or_default();
    match code {
        "UNAUTHORIZED" => 401,
        "FORBIDDEN" => 403,
        c if c.ends_with("NOT_FOUND") => 404,
        _ => panic!("{kind} as {who:?}: {reply}"),
    }
}

/// The operation frames follow the same rules as REST, for the callers that can hold a
/// socket (agents): the party, another member, an agent of another team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_frame_answers_every_agent_as_its_rest_twin() {
    let app = TestApp::start().await;
    let mut wrong = Vec::new();
    let mut n = 0;
    for (kind, rest, claims) in FRAMES {
        let row = MATRIX
            .iter()
            .find(|(op, _)| op == rest)
            .map(|(_, row)| *row)
            .expect("the twin has a row");
        for who in [Who::Party, Who::Member, Who::Outsider] {
            n += 1;
            let fx = fixture(&app, n).await;
            let want = match who {
                Who::Member | Who::Outsider if *claims => CLAIM_REFUSED,
                _ => row[CALLERS.iter().position(|w| *w == who).expect("column")],
            };
            let got = frame_status(&app, &fx, kind, who).await;
            let same = if want < 300 { got == 0 } else { got == want };
            if !same {
                wrong.push(format!(
                    "{kind} as {who:?}: REST says {want}, the frame {got}"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    app.stop().await;
}

/// The table covers the whole document: an operation added without a row fails here.
#[test]
fn every_documented_operation_has_a_row() {
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("document");
    let mut documented = std::collections::BTreeSet::new();
    for operations in doc["paths"].as_object().expect("paths").values() {
        for operation in operations.as_object().expect("operations").values() {
            if let Some(id) = operation["operationId"].as_str() {
                documented.insert(id.to_owned());
            }
        }
    }
    let tabled: std::collections::BTreeSet<String> =
        MATRIX.iter().map(|(op, _)| (*op).to_owned()).collect();
    assert_eq!(
        documented, tabled,
        "operations without a row, or rows without an operation"
    );
    let framed: std::collections::BTreeSet<&str> = FRAMES.iter().map(|(f, ..)| *f).collect();
    for op in switchboard_types::frames::socket_operations() {
        assert!(framed.contains(op), "frame {op} has no row");
    }
}

/// Sends one REST call as the holder of `token`; the status and error code.
async fn answer(
    app: &TestApp,
    method: Method,
    path: &str,
    body: Option<Value>,
    token: &str,
) -> (u16, Value) {
    let mut req = app.req(method, path).token(token);
    if let Some(body) = body {
        req = req.json(body);
    }
    let res = req.send().await;
    (res.status, res.body["error_code"].clone())
}

/// Where a caller is refused a message or task it is not party to, the answer is the
/// same as for one that does not exist, so ids cannot be probed — over REST, and over
/// the socket for the frames that name their acting agent.
#[tokio::test]
async fn hidden_and_missing_answer_alike() {
    let app = TestApp::start().await;
    let fx = fixture(&app, 0).await;
    let member = CALLERS.iter().position(|w| *w == Who::Member);
    let hidden_ops = MATRIX
        .iter()
        .filter(|(_, row)| member.is_some_and(|i| row[i] == 404));
    let mut compared = 0;
    for (op, _) in hidden_ops {
        let (method, path, body, _) = fx.call(op);
        let missing = path
            .replace(&fx.message, "msg_missing")
            // A trace is named by its first message's id.
            .replace(
                fx.message.trim_start_matches("msg_"),
                "0123456789abcdef0123456789abcdef",
            )
            .replace("/t1", "/t-missing")
            .replace("/t2/", "/t-missing/")
            .replace("/t3/", "/t-missing/")
            .replace(&fx.approval, "appr_missing");
        assert_ne!(path, missing, "{op} names a message, task or approval");
        for stranger in [&fx.m, &fx.z] {
            let seen = answer(&app, method.clone(), &path, body.clone(), &stranger.token).await;
            let absent = answer(
                &app,
                method.clone(),
                &missing,
                body.clone(),
                &stranger.token,
            )
            .await;
            assert_eq!(seen, absent, "{op} as {}", stranger.id);
            compared += 1;
        }
    }
    assert!(compared >= 12, "only {compared} comparisons");
    for (kind, ..) in FRAMES.iter().filter(|(_, _, claims)| *claims) {
        let mut frame = fx.frame(kind);
        let mut ws = app.ws(&fx.m, "").await;
        let seen = ws.call(kind, frame.clone()).await;
        frame["task_id"] = json!("t-missing");
        let absent = ws.call(kind, frame).await;
        assert_eq!(seen["ok"], false, "{kind}: {seen}");
        assert_eq!(seen["error"], absent["error"], "{kind}");
    }
    app.stop().await;
}
