//! The gate against bodies PyYAML dumps for Wise Agents (copied from `yaml.dump` of a
//! `YAMLObject` with the real tag and fields) and against what must never be relayed.

use super::*;

const MAX: usize = 64 * 1024;

/// `yaml.dump(WiseAgentMessage(...))` of a current Wise Agents (six fields).
const CURRENT: &str = "!wiseagents.WiseAgentMessage\n_context_name: default\n_message: What is the weather?\n_message_type: QUERY\n_route_response_to: Alice\n_sender: Alice\n_tool_id: null\n";

/// An older one (with `_chat_id`), whose text PyYAML double-quotes with escapes.
const OLD: &str = "!wiseagents.WiseAgentMessage\n_chat_id: '12345'\n_context_name: default\n_message: \"line one\\nline: two\\n  indented 'quote' \\\"dq\\\" \\xE9 \\u2713\"\n_message_type: null\n_route_response_to: null\n_sender: Bob\n_tool_id: null\n";

#[test]
fn what_wise_agents_dump_passes_with_every_field() {
    let m = check(CURRENT.as_bytes(), MAX).expect("passes");
    assert_eq!(m.message.as_deref(), Some("What is the weather?"));
    assert_eq!(m.sender.as_deref(), Some("Alice"));
    assert_eq!(m.message_type.as_deref(), Some("QUERY"));
    assert_eq!(m.context_name.as_deref(), Some("default"));
    assert_eq!(m.route_response_to.as_deref(), Some("Alice"));
    assert_eq!(m.tool_id, None);
    assert_eq!(m.chat_id, None);
    let m = check(OLD.as_bytes(), MAX).expect("passes");
    assert_eq!(m.chat_id.as_deref(), Some("12345"));
    assert_eq!(
        m.message.as_deref(),
        Some("line one\nline: two\n  indented 'quote' \"dq\" é ✓")
    );
    assert_eq!(m.message_type, None);
    // A number-like text stays text: PyYAML quotes it, and so does the gate read it.
    let m = check(
        CURRENT.replace("What is the weather?", "'123'").as_bytes(),
        MAX,
    )
    .expect("passes");
    assert_eq!(m.message.as_deref(), Some("123"));
}

#[test]
fn what_switchboard_writes_reads_back_the_same() {
    let m = WiseMessage {
        message: Some("a\nb: \"q\" \\ \u{1} \u{99} \u{85}\u{2028} é ✓ \u{1F600}".into()),
        sender: Some("Al".into()),
        message_type: Some("RESPONSE".into()),
        context_name: Some("null".into()),
        ..Default::default()
    };
    let yaml = m.to_yaml();
    assert!(
        yaml.starts_with("!wiseagents.WiseAgentMessage\n_chat_id: null\n"),
        "{yaml}"
    );
    assert_eq!(check(yaml.as_bytes(), MAX), Ok(m));
}

#[test]
fn code_tags_anchors_and_other_shapes_are_refused() {
    let refused = |body: &str| check(body.as_bytes(), MAX).expect_err(body);
    assert!(matches!(
        refused("!!python/object/apply:os.system\nargs: ['touch /tmp/pwned']\n"),
        BodyRefused::Tag(_)
    ));
    assert!(matches!(
        refused(&CURRENT.replace(
            "_tool_id: null",
            "_tool_id: !!python/object/apply:os.system ['id']"
        )),
        BodyRefused::Tag(_) | BodyRefused::NotScalar(_)
    ));
    assert!(matches!(
        refused(&CURRENT.replace("_tool_id: null", "_tool_id: !!str x")),
        BodyRefused::Tag(_)
    ));
    assert!(matches!(
        refused(&CURRENT.replace("!wiseagents.WiseAgentMessage", "!other.Thing")),
        BodyRefused::Tag(_)
    ));
    assert_eq!(
        refused(&CURRENT.replace("!wiseagents.WiseAgentMessage\n", "")),
        BodyRefused::NotAMessage
    );
    assert_eq!(
        refused(&CURRENT.replace("_sender: Alice", "_sender: &a Alice\n_chat_id: *a")),
        BodyRefused::Anchor
    );
    assert_eq!(
        refused(&CURRENT.replace("_tool_id: null", "_tool_id: [a, b]")),
        BodyRefused::NotScalar("_tool_id".into())
    );
    assert_eq!(
        refused(&CURRENT.replace("_tool_id: null", "_tool_id: {a: b}")),
        BodyRefused::NotScalar("_tool_id".into())
    );
    assert_eq!(
        refused(&CURRENT.replace("_tool_id: null", "_extra: 1")),
        BodyRefused::UnknownField("_extra".into())
    );
    assert_eq!(
        refused(&CURRENT.replace("_tool_id: null", "_sender: Eve")),
        BodyRefused::Duplicate("_sender".into())
    );
    assert_eq!(
        refused(&CURRENT.replace("_sender: Alice\n", "")),
        BodyRefused::Missing("_sender")
    );
    assert_eq!(
        refused(&CURRENT.replace("QUERY", "SHUTDOWN")),
        BodyRefused::MessageType("SHUTDOWN".into())
    );
    assert!(matches!(
        refused(&format!("{CURRENT}---\n{CURRENT}")),
        BodyRefused::NotAMessage
    ));
    assert!(matches!(
        refused("_message: [unclosed\n"),
        BodyRefused::NotYaml(_) | BodyRefused::NotAMessage
    ));
    assert_eq!(check(&[0xff, 0xfe], MAX), Err(BodyRefused::NotUtf8));
    assert_eq!(
        check(CURRENT.as_bytes(), 10),
        Err(BodyRefused::TooLarge { max: 10 })
    );
}

/// `yaml.dump` of what Wise Agents' `PassThroughClientAgent.process_request` sends:
/// `WiseAgentMessage(message=request, sender=self.name, context_name=request.context_name)`.
const PASS_THROUGH: &str = "!wiseagents.WiseAgentMessage\n_context_name: default\n_message: !wiseagents.WiseAgentMessage\n  _context_name: default\n  _message: What is 2+2?\n  _message_type: QUERY\n  _route_response_to: Client\n  _sender: Client\n  _tool_id: null\n_message_type: null\n_route_response_to: null\n_sender: PassThroughClientAgent1\n_tool_id: null\n";

#[test]
fn a_forwarded_request_nested_in_a_message_passes_and_reads_back() {
    let m = check(PASS_THROUGH.as_bytes(), MAX).expect("passes");
    assert_eq!(m.sender.as_deref(), Some("PassThroughClientAgent1"));
    assert_eq!(m.message, None);
    let inner = m.nested.as_deref().expect("nested");
    assert_eq!(inner.message.as_deref(), Some("What is 2+2?"));
    assert_eq!(inner.sender.as_deref(), Some("Client"));
    assert_eq!(m.text(), Some("What is 2+2?"));
    // What Switchboard writes for it (a flow mapping inside) passes and is the same.
    let yaml = m.to_yaml();
    assert!(
        yaml.contains("_message: !wiseagents.WiseAgentMessage {_chat_id: null"),
        "{yaml}"
    );
    assert_eq!(check(yaml.as_bytes(), MAX), Ok(m));
}

#[test]
fn nesting_is_bounded_and_only_the_message_tag_nests() {
    let refused = |body: &str| check(body.as_bytes(), MAX).expect_err(body);
    // Four levels pass; five do not.
    let level =
        |inner: &str| format!("!wiseagents.WiseAgentMessage {{_message: {inner}, _sender: s}}");
    let mut body = "x".to_owned();
    for _ in 0..MAX_NESTING {
        body = level(&body);
    }
    check(body.as_bytes(), MAX).expect("four levels pass");
    assert_eq!(refused(&level(&body)), BodyRefused::TooDeep);
    // Another tag nested, a nested mapping in another field, a nested untagged mapping,
    // a nested message that breaks a rule.
    assert!(matches!(
        refused(
            "!wiseagents.WiseAgentMessage\n_message: !!python/object:os.system {}\n_sender: s\n"
        ),
        BodyRefused::Tag(_)
    ));
    assert!(matches!(
        refused(
            "!wiseagents.WiseAgentMessage\n_message: m\n_sender: !wiseagents.WiseAgentMessage {_message: m, _sender: s}\n"
        ),
        BodyRefused::Tag(_)
    ));
    assert_eq!(
        refused("!wiseagents.WiseAgentMessage\n_message: {_message: m, _sender: s}\n_sender: s\n"),
        BodyRefused::NotScalar("_message".into())
    );
    assert_eq!(
        refused(
            "!wiseagents.WiseAgentMessage\n_message: !wiseagents.WiseAgentMessage {_message: m}\n_sender: s\n"
        ),
        BodyRefused::Missing("_sender")
    );
    assert!(matches!(
        refused(
            "!wiseagents.WiseAgentMessage\n_message: !wiseagents.WiseAgentMessage {_message: !!python/name:os.system x, _sender: s}\n_sender: s\n"
        ),
        BodyRefused::Tag(_)
    ));
}

#[test]
fn a_nul_anywhere_is_refused_as_every_transport_refuses_it() {
    let nul_value = CURRENT.replace("_tool_id: null", "_tool_id: \"c\\0\"");
    assert_eq!(check(nul_value.as_bytes(), MAX), Err(BodyRefused::Nul));
    let nul_key = CURRENT.replace("_tool_id: null", "\"_tool\\0\": x");
    assert_eq!(check(nul_key.as_bytes(), MAX), Err(BodyRefused::Nul));
    let nested = CURRENT.replace(
        "_message: What is the weather?",
        "_message: !wiseagents.WiseAgentMessage {_message: \"a\\x00b\", _sender: A}",
    );
    assert_eq!(check(nested.as_bytes(), MAX), Err(BodyRefused::Nul));
}
