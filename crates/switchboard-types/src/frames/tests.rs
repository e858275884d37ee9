use serde_json::json;

use super::*;
use crate::messages::{Content, MessageKind, MessageType, Priority, SendMessage};
use crate::operation::{MessageOp, TeamOp};
use crate::tasks::TaskFrame;

fn err(text: &str) -> Box<BadFrame> {
    ClientFrame::decode(text).expect_err(text)
}

#[test]
fn decodes_acks_pings_and_operations() {
    assert!(matches!(
        ClientFrame::decode(r#"{"type":"ack","seq":5}"#),
        Ok(ClientFrame::Ack { seq: 5 })
    ));
    assert!(matches!(
        ClientFrame::decode(r#"{"type":"ping"}"#),
        Ok(ClientFrame::Ping)
    ));
    let frame = ClientFrame::decode(
        r#"{"type":"send_message","request_id":"r1","idempotency_key":"k","sender_agent_id":"a","recipient_agent_ids":["b"],"message_type":"request","content":{"text":"x"}}"#,
    );
    let Ok(ClientFrame::Request {
        request_id,
        operation,
        ..
    }) = frame
    else {
        panic!("{frame:?}");
    };
    assert_eq!(request_id, json!("r1"));
    let Operation::Messages(MessageOp::SendMessage {
        message,
        idempotency_key,
    }) = *operation
    else {
        panic!("not a send");
    };
    assert_eq!(idempotency_key.as_deref(), Some("k"));
    assert_eq!(message.recipient_agent_ids, vec!["b"]);
    let nested = ClientFrame::decode(
        r#"{"type":"get_messages","request_id":7,"filters":{"unread_only":true},"limit":5}"#,
    );
    let Ok(ClientFrame::Request { operation, .. }) = nested else {
        panic!("{nested:?}");
    };
    let Operation::Messages(MessageOp::GetMessages(q)) = *operation else {
        panic!("not an inbox query");
    };
    assert_eq!((q.unread_only, q.limit), (Some(true), Some(5)));
}

#[test]
fn bad_frames_name_what_is_wrong() {
    assert_eq!(err("{nope").error.details["field"], "frame");
    assert_eq!(err("[1]").error.details["field"], "frame");
    assert_eq!(err(r#"{"request_id":"r"}"#).error.details["field"], "type");
    let unknown = err(r#"{"type":"teleport","request_id":"r9"}"#);
    assert_eq!(unknown.error.details["field"], "type");
    assert_eq!(unknown.request_id, Some(json!("r9")));
    assert_eq!(
        err(r#"{"type":"send_message"}"#).error.details["field"],
        "request_id"
    );
    let missing = err(r#"{"type":"send_message","request_id":"r2","sender_agent_id":"a"}"#);
    assert_eq!(missing.error.details["field"], "recipient_agent_ids");
    assert_eq!(missing.request_id, Some(json!("r2")));
    assert_eq!(err(r#"{"type":"ack"}"#).error.details["field"], "seq");
    assert_eq!(
        err(r#"{"type":"ack","seq":-1}"#).error.details["field"],
        "seq"
    );
    assert_eq!(
        err(r#"{"type":"get_task","request_id":1}"#).error.details["field"],
        "task_id"
    );
    assert_eq!(
        err(r#"{"type":"get_task","request_id":1,"task_id":"t","x":1}"#)
            .error
            .details["field"],
        "x"
    );
}

/// What a client encodes, the server decodes to the same operation.
#[test]
fn client_frames_round_trip() {
    let message = SendMessage {
        priority: Priority::High,
        content: Content::text("hello"),
        ..SendMessage::new("a", &["b"], MessageType::Request, "")
    };
    let frame = ClientFrame::Request {
        request_id: json!(3),
        operation: Box::new(Operation::Messages(MessageOp::SendMessage {
            message,
            idempotency_key: Some("key-1".into()),
        })),
        trace: crate::trace::TraceContext::from_values(
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
            Some("k=v"),
        ),
    };
    let text = frame.encode().expect("a socket operation");
    let Ok(ClientFrame::Request {
        request_id,
        operation,
        trace,
    }) = ClientFrame::decode(&text)
    else {
        panic!("{text}");
    };
    assert_eq!(request_id, json!(3));
    assert_eq!(trace.state.as_deref(), Some("k=v"), "{text}");
    let Operation::Messages(MessageOp::SendMessage {
        message,
        idempotency_key,
    }) = *operation
    else {
        panic!("{text}");
    };
    assert_eq!(idempotency_key.as_deref(), Some("key-1"));
    assert_eq!(
        (message.priority, message.content.text.as_str()),
        (Priority::High, "hello")
    );
    let admin = ClientFrame::Request {
        request_id: json!(4),
        operation: Box::new(Operation::Teams(TeamOp::GetTeam {
            team_id: "t".into(),
        })),
        trace: Default::default(),
    };
    assert!(
        matches!(admin.encode(), Err(EncodeError::NotCarried("get_team"))),
        "team administration is REST only"
    );
}

#[test]
fn pushes_carry_the_recipients_sequence_number() {
    assert_eq!(
        push_text(
            PushKind::Message,
            7,
            r#"{"message_id":"m1","kind":"message"}"#
        ),
        r#"{"type":"message","seq":7,"message":{"seq":7,"message_id":"m1","kind":"message"}}"#
    );
    assert_eq!(
        push_text(
            PushKind::Task(TaskFrame::TaskRequest),
            3,
            r#"{"task_id":"t1"}"#
        ),
        r#"{"type":"TaskRequest","seq":3,"task_id":"t1"}"#
    );
    assert_eq!(
        push_text(PushKind::Task(TaskFrame::ErrorMessage), 1, "{}"),
        r#"{"type":"ErrorMessage","seq":1}"#
    );
    let task = push_text(
        PushKind::Task(TaskFrame::TaskResponse),
        9,
        r#"{"task_id":"t"}"#,
    );
    assert!(matches!(
        serde_json::from_str::<ServerFrame>(&task),
        Ok(ServerFrame::TaskResponse(TaskPush { seq: 9, .. }))
    ));
}

#[test]
fn a_pushed_message_reads_back_as_the_view_with_its_seq() {
    let view = MessageView {
        route: None,
        message_id: "m1".into(),
        kind: MessageKind::Message,
        seq: Some(4),
        sender_agent_id: "a".into(),
        sender_role: "r".into(),
        message_type: MessageType::Information,
        content: Content::text("hi"),
        priority: Priority::Normal,
        timestamp: crate::time::Timestamp::from_micros(0),
        read_status: false,
        requires_response: false,
        response_deadline: None,
        context_reference: None,
        thread_id: None,
        in_reply_to: None,
        response_status: None,
        cause_by: None,
        sent_from: None,
        send_to: None,
        instruct_content: None,
        news: None,
        traceparent: None,
        tracestate: None,
    };
    let text = push_frame(4, &view).expect("renders");
    let Ok(ServerFrame::Message { seq, message }) = serde_json::from_str::<ServerFrame>(&text)
    else {
        panic!("{text}");
    };
    assert_eq!((seq, *message), (4, view));
}
