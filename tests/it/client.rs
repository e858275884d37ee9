//! The client crate (`switchboard_client`) against the real server, over both
//! transports, and the worked example built on it.

use std::time::Duration;

use serde_json::{Map, json};
use switchboard_client::{Client, ClientError, Incoming};
use switchboard_types::ErrorCode;
use switchboard_types::assistance::{AssistanceType, RequestAssistance, RequestDetails};
use switchboard_types::broadcasts::{BroadcastContent, BroadcastUpdate, UpdateType, Urgency};
use switchboard_types::inbox::InboxQuery;
use switchboard_types::messages::{
    MessageType, RespondToMessage, ResponseContent, ResponseStatus, SendMessage,
};
use switchboard_types::task_state::TaskStatus;
use switchboard_types::tasks::{
    Answer, Cancel, Clarify, Handoff, TaskQuery, TaskRequest, TaskResponseStatus, TaskResult,
};
use tokio::sync::mpsc;

use crate::support::{Agent, TestApp};

#[derive(Debug, Clone, Copy)]
enum Kind {
    Http,
    Ws,
}

async fn client(app: &TestApp, agent: &Agent, kind: Kind) -> Client {
    match kind {
        Kind::Http => Client::http(&app.base, &agent.token).await,
        Kind::Ws => Client::websocket(&app.base, &agent.token).await,
    }
    .expect("client connects")
}

/// The next incoming entry of `kind`, skipping others. Patient: after a server restart
/// the client reconnects with backoff, and on a loaded machine (CI runs the suite on
/// both engines at once) the restart itself can take seconds; what is checked is that
/// nothing is lost or doubled, not how fast.
async fn next_of(rx: &mut mpsc::Receiver<Incoming>, kind: &str) -> Incoming {
    loop {
        let entry = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("an entry arrives in time")
            .expect("the stream is open");
        if entry.kind() == kind {
            return entry;
        }
    }
}

fn task(me: &str, id: &str, caps: &[&str]) -> TaskRequest {
    TaskRequest {
        task_id: Some(id.into()),
        description: format!("do {id}"),
        data: Map::new(),
        originating_agent_id: me.into(),
        callback_url: None,
        priority: None,
        required_capabilities: caps.iter().map(|c| (*c).to_owned()).collect(),
        target_agent_id: None,
        parent_task_id: None,
        assignee_role: None,
    }
}

/// A, B and C as clients of one transport, with A's and B's incoming streams.
struct Parties {
    ca: Client,
    cb: Client,
    cc: Client,
    a_in: mpsc::Receiver<Incoming>,
    b_in: mpsc::Receiver<Incoming>,
}

/// SEND_MESSAGE (with an idempotency key), GET_MESSAGES, MARK_MESSAGE_READ,
/// RESPOND_TO_MESSAGE and the message detail, each seen arriving where it should.
async fn messaging_operations(p: &mut Parties) {
    let mut ask = SendMessage::new("A", &["B"], MessageType::Request, "review please");
    ask.requires_response = true;
    let sent =
        p.ca.send_message(ask.clone(), Some("k1"))
            .await
            .expect("send");
    let again = p.ca.send_message(ask, Some("k1")).await.expect("retry");
    assert_eq!(
        sent.message_id, again.message_id,
        "idempotency key honoured"
    );
    let got = next_of(&mut p.b_in, "message").await;
    let view = got.message().expect("a message");
    assert_eq!(view.message_id, sent.message_id);
    assert_eq!(view.content.text, "review please");
    let page =
        p.cb.get_messages(InboxQuery {
            unread_only: Some(true),
            ..InboxQuery::default()
        })
        .await
        .expect("inbox");
    assert_eq!(page.total_count, 1);
    let marked = p.cb.mark_read(&[&sent.message_id]).await.expect("read");
    assert_eq!(marked.marked_read, std::slice::from_ref(&sent.message_id));
    let responded =
        p.cb.respond(
            &sent.message_id,
            RespondToMessage {
                responder_agent_id: "B".into(),
                original_message_id: None,
                response_content: ResponseContent {
                    text: "done".into(),
                    data: Map::new(),
                    status: ResponseStatus::Completed,
                },
                additional_recipients: vec![],
                route: None,
            },
            None,
        )
        .await
        .expect("respond");
    assert!(responded.original_message_updated);
    let detail = p.ca.get_message(&sent.message_id).await.expect("get");
    assert_eq!(detail.responses.len(), 1);
    let response = next_of(&mut p.a_in, "message").await;
    assert_eq!(
        response.message().expect("message").message_id,
        responded.response_message_id
    );
}

/// BROADCAST_UPDATE and REQUEST_ASSISTANCE.
async fn broadcast_and_assistance(p: &Parties) {
    let broadcast =
        p.ca.broadcast(
            BroadcastUpdate {
                sender_agent_id: "A".into(),
                update_type: UpdateType::Progress,
                urgency: Urgency::Info,
                content: BroadcastContent {
                    summary: "halfway".into(),
                    details: String::new(),
                    impact: String::new(),
                    action_required: false,
                },
            },
            None,
        )
        .await
        .expect("broadcast");
    assert_eq!(broadcast.recipients, ["B", "C"]);
    let help =
        p.cb.request_assistance(
            RequestAssistance {
                requester_agent_id: "B".into(),
                assistance_type: AssistanceType::Review,
                target_agents: vec![],
                required_capabilities: vec!["review".into()],
                request_details: RequestDetails {
                    description: "check my work".into(),
                    context: String::new(),
                    deadline: None,
                    priority: Default::default(),
                },
            },
            None,
        )
        .await
        .expect("assistance");
    assert_eq!(help.potential_responders[0].agent_id, "C");
}

/// The task protocol: A submits, B asks, A answers, B hands to C, C reports.
async fn task_operations(p: &mut Parties) {
    let submitted =
        p.ca.submit_task(TaskRequest {
            target_agent_id: Some("B".into()),
            ..task("A", "t1", &[])
        })
        .await
        .expect("submit");
    assert!(submitted.success);
    let request = next_of(&mut p.b_in, "TaskRequest").await;
    assert_eq!(request.frame["task_id"], "t1");
    let asked =
        p.cb.clarify(
            "t1",
            Clarify {
                question: "how?".into(),
            },
        )
        .await
        .expect("clarify");
    let cid = asked
        .task
        .open_clarification
        .expect("open")
        .clarification_id;
    let question = next_of(&mut p.a_in, "ClarificationRequest").await;
    let typed: switchboard_types::tasks::ClarificationRequest = question.task().expect("typed");
    assert_eq!(typed.clarification_id, cid);
    p.ca.answer(
        "t1",
        &cid,
        Answer {
            answer: "carefully".into(),
        },
    )
    .await
    .expect("answer");
    next_of(&mut p.b_in, "ClarificationResponse").await;
    p.cb.handoff(
        "t1",
        Handoff {
            new_agent_id: "C".into(),
            reason: "C knows".into(),
            current_agent_id: Some("B".into()),
        },
    )
    .await
    .expect("handoff");
    next_of(&mut p.a_in, "HandoffNotification").await;
    p.cc.report(
        "t1",
        TaskResult {
            status: TaskResponseStatus::InProgress,
            result_data: json!({"step": 1}),
        },
    )
    .await
    .expect("progress");
    let done =
        p.cc.report(
            "t1",
            TaskResult {
                status: TaskResponseStatus::Success,
                result_data: json!({"ok": true}),
            },
        )
        .await
        .expect("complete");
    assert_eq!(done.task.status, TaskStatus::Success);
}

/// The task detail and list, then a second task submitted and canceled.
async fn task_reads_and_cancel(p: &Parties) {
    let detail = p.ca.get_task("t1").await.expect("task");
    assert_eq!(detail.events.len(), 6);
    let listed = p.cc.list_tasks(TaskQuery::default()).await.expect("list");
    assert_eq!(listed.tasks[0].task_id, "t1");
    p.ca.submit_task(task("A", "t2", &["code"]))
        .await
        .expect("t2");
    let canceled =
        p.ca.cancel(
            "t2",
            Cancel {
                reason: Some("no".into()),
            },
        )
        .await
        .expect("cancel");
    assert_eq!(canceled.task.status, TaskStatus::Canceled);
}

/// Refusals carry the server's error code.
async fn refusals(p: &Parties) {
    let err =
        p.ca.send_message(
            SendMessage::new("A", &["nobody"], MessageType::Information, "x"),
            None,
        )
        .await
        .expect_err("unknown recipient");
    assert_eq!(err.code(), Some(ErrorCode::InvalidRecipient), "{err}");
    let err = p.cc.get_task("t2").await.expect_err("not a party");
    assert_eq!(err.code(), Some(ErrorCode::TaskNotFound));
    let err =
        p.ca.report(
            "t1",
            TaskResult {
                status: TaskResponseStatus::Failed,
                result_data: json!(null),
            },
        )
        .await
        .expect_err("finished");
    assert!(matches!(err, ClientError::Server { .. }));
    assert_eq!(err.code(), Some(ErrorCode::Forbidden));
}

async fn every_operation(kind: Kind) {
    let app = TestApp::start().await;
    let team = app.team("clients").await;
    let a = app.agent(&team, "A", &["planning"]).await;
    let b = app.agent(&team, "B", &["code"]).await;
    let c = app.agent(&team, "C", &["code", "review"]).await;
    let ca = client(&app, &a, kind).await;
    let cb = client(&app, &b, kind).await;
    let cc = client(&app, &c, kind).await;
    assert_eq!((ca.agent_id(), ca.team_id()), ("A", "clients"));
    let b_in = cb.incoming();
    let a_in = ca.incoming();
    let mut parties = Parties {
        ca,
        cb,
        cc,
        a_in,
        b_in,
    };
    messaging_operations(&mut parties).await;
    broadcast_and_assistance(&parties).await;
    task_operations(&mut parties).await;
    task_reads_and_cancel(&parties).await;
    refusals(&parties).await;
    app.stop().await;
}

#[tokio::test]
async fn every_operation_over_http() {
    every_operation(Kind::Http).await;
}

#[tokio::test]
async fn every_operation_over_the_websocket() {
    every_operation(Kind::Ws).await;
}

#[tokio::test]
async fn a_bad_token_is_refused_with_the_server_code() {
    let app = TestApp::start().await;
    for result in [
        Client::http(&app.base, "sb_agent_nope").await,
        Client::websocket(&app.base, "sb_agent_nope").await,
    ] {
        let err = result.err().expect("refused");
        assert_eq!(err.code(), Some(ErrorCode::Unauthorized), "{err}");
    }
    let err = Client::http("http://127.0.0.1:1", "x")
        .await
        .err()
        .expect("unreachable");
    assert!(matches!(err, ClientError::Transport(_)), "{err}");
    app.stop().await;
}

#[tokio::test]
async fn the_websocket_client_resumes_after_a_server_restart_without_loss_or_duplicate() {
    let mut app = TestApp::start().await;
    // Restart on the same port, so the client's reconnects find the new server.
    app.config.listen = app.server().local_addr();
    let team = app.team("resume").await;
    let a = app.agent(&team, "A", &[]).await;
    let b = app.agent(&team, "B", &[]).await;
    let cb = client(&app, &b, Kind::Ws).await;
    let mut incoming = cb.incoming();
    let to_b = Agent {
        id: "B".into(),
        token: String::new(),
    };
    for n in 0..5 {
        app.send(&a, &[&to_b], &format!("n{n}")).await;
    }
    let mut texts = Vec::new();
    for _ in 0..5 {
        let entry = next_of(&mut incoming, "message").await;
        texts.push(entry.message().expect("message").content.text);
    }
    app.restart().await;
    // Sent while the client is reconnecting: stored, then replayed to it.
    for n in 5..10 {
        app.send(&a, &[&to_b], &format!("n{n}")).await;
    }
    for _ in 5..10 {
        let entry = next_of(&mut incoming, "message").await;
        texts.push(entry.message().expect("message").content.text);
    }
    let expected: Vec<String> = (0..10).map(|n| format!("n{n}")).collect();
    assert_eq!(texts, expected, "in order, none lost, none twice");
    // Operations work on the new connection.
    let page = cb.get_messages(InboxQuery::default()).await.expect("inbox");
    assert_eq!(page.total_count, 10);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(incoming.try_recv().is_err(), "no duplicate arrives later");
    app.stop().await;
}

#[tokio::test]
async fn the_worked_example_runs_to_the_end() {
    let app = TestApp::start().await;
    let stdout = app.run_example("team_loop").await;
    for round in 1..=3 {
        assert!(
            stdout.contains(&format!("[C] round {round}: compiled 2 parts")),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!("[D] round {round}: reviewed")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("[B] got feedback: round 2"), "{stdout}");
    assert!(stdout.ends_with("done: 3 rounds\n"), "{stdout}");
    app.stop().await;
}
