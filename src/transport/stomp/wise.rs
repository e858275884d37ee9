//! Wise Agents' message bodies: the gate a body must pass to be relayed, and the body
//! Switchboard writes for a Wise Agents receiver.
//!
//! Wise Agents dump a `WiseAgentMessage` with PyYAML and load what arrives with PyYAML's
//! *unsafe* loader, so a relayed `!!python/object/apply:os.system` body would run code in
//! the receiving agent. A body is therefore relayed only if it is exactly what their
//! dump produces: one document holding one block or flow mapping tagged
//! `!wiseagents.WiseAgentMessage`, whose keys are the known fields and whose values are
//! untagged scalars — except `_message`, which may itself be such a mapping (Wise Agents'
//! `PassThroughClientAgent` forwards the request it got as the `_message` of its own), to
//! at most [`MAX_NESTING`] levels — no other tag anywhere, no anchors, no aliases, no
//! other collections, valid UTF-8, within the size limit. The check walks the YAML parser's
//! events (granit-parser) rather than deserialising, so nothing is ever constructed from
//! a tag.
//!
//! Bodies going out are written here, not re-emitted from a client's YAML: every value as
//! a double-quoted scalar with everything unprintable escaped, `null` for an absent
//! value, keys sorted as PyYAML sorts them.

use std::borrow::Cow;

use granit_parser::{Event, Parser};

/// The tag of a Wise Agents message.
pub const TAG: &str = "wiseagents.WiseAgentMessage";

/// Every field a `WiseAgentMessage` has (`_chat_id` only in older versions), sorted.
pub const FIELDS: [&str; 7] = [
    "_chat_id",
    "_context_name",
    "_message",
    "_message_type",
    "_route_response_to",
    "_sender",
    "_tool_id",
];

/// Fields a relayed body must have: the text, and who sends it (a team bridge acts as
/// `_sender`).
pub const REQUIRED: [&str; 2] = ["_message", "_sender"];

/// `_message_type` values Wise Agents know (absent or `null` is allowed too).
pub const MESSAGE_TYPES: [&str; 7] = [
    "ACK",
    "ALERT",
    "CANNOT_ANSWER",
    "QUERY",
    "RESPONSE",
    "ACTION_REQUEST",
    "HUMAN",
];

/// How many messages deep a `_message` may nest (a pass-through of a pass-through of a
/// pass-through): enough for the chains Wise Agents builds, small enough that no body
/// makes the gate or the writer recurse far.
pub const MAX_NESTING: usize = 4;

/// A body that passed the gate: each field's value (`None` for `null` or absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WiseMessage {
    pub chat_id: Option<String>,
    pub context_name: Option<String>,
    /// `_message` as text; `None` when absent, `null`, or a message ([`Self::nested`]).
    pub message: Option<String>,
    /// `_message` when it is itself a `WiseAgentMessage`.
    pub nested: Option<Box<WiseMessage>>,
    pub message_type: Option<String>,
    pub route_response_to: Option<String>,
    pub sender: Option<String>,
    pub tool_id: Option<String>,
}

impl WiseMessage {
    fn field(&mut self, name: &str) -> Option<&mut Option<String>> {
        Some(match name {
            "_chat_id" => &mut self.chat_id,
            "_context_name" => &mut self.context_name,
            "_message" => &mut self.message,
            "_message_type" => &mut self.message_type,
            "_route_response_to" => &mut self.route_response_to,
            "_sender" => &mut self.sender,
            "_tool_id" => &mut self.tool_id,
            _ => return None,
        })
    }

    fn values(&self) -> [&Option<String>; 7] {
        [
            &self.chat_id,
            &self.context_name,
            &self.message,
            &self.message_type,
            &self.route_response_to,
            &self.sender,
            &self.tool_id,
        ]
    }

    /// The text a person reads: `_message`, or the innermost message's.
    pub fn text(&self) -> Option<&str> {
        match &self.nested {
            Some(nested) => nested.text(),
            None => self.message.as_deref(),
        }
    }

    /// The body for a Wise Agents receiver: all seven fields, so both generations of
    /// Wise Agents read it. A nested `_message` is written as a flow mapping with the
    /// same tag, which PyYAML loads as the same object its block dump made.
    pub fn to_yaml(&self) -> String {
        let mut out = format!("!{TAG}\n");
        self.fields(&mut out, "", "\n");
        out
    }

    /// `!wiseagents.WiseAgentMessage {_chat_id: …, …}`.
    fn flow(&self, out: &mut String) {
        out.push_str(&format!("!{TAG} {{"));
        self.fields(out, ", ", "");
        out.push('}');
    }

    /// Every field as `name: value`, `between` each two and `after` each; a nested
    /// message as a flow mapping.
    fn fields(&self, out: &mut String, between: &str, after: &str) {
        for (at, (name, value)) in FIELDS.iter().zip(self.values()).enumerate() {
            if at > 0 {
                out.push_str(between);
            }
            out.push_str(name);
            out.push_str(": ");
            match (*name, &self.nested, value) {
                ("_message", Some(nested), _) => nested.flow(out),
                (_, _, Some(v)) => double_quoted(out, v),
                (_, _, None) => out.push_str("null"),
            }
            out.push_str(after);
        }
    }
}

/// Writes `text` as a YAML double-quoted scalar: printable characters as they are, the
/// rest escaped. YAML (and PyYAML's reader) refuse raw control characters, C1 controls
/// included, and read raw line separators (NEL, U+2028, U+2029) as line breaks, so
/// those are escaped too; the fuzzer found the C1 case when JSON quoting was used.
fn double_quoted(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            ' '..='~' => out.push(c),
            '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..
                if !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') =>
            {
                out.push(c)
            }
            c if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push_str(&format!("\\u{:04X}", c as u32)),
        }
    }
    out.push('"');
}

/// Why a body was not relayed; the text is the `ERROR` frame's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyRefused {
    #[error("the body is larger than {max} bytes")]
    TooLarge { max: usize },
    #[error("the body is not UTF-8")]
    NotUtf8,
    #[error("the body is not valid YAML: {0}")]
    NotYaml(String),
    #[error("the body must be one !{TAG} mapping")]
    NotAMessage,
    #[error("tag '{0}' is not allowed: only !{TAG} on the mapping")]
    Tag(String),
    #[error("anchors and aliases are not allowed")]
    Anchor,
    #[error("field '{0}' must be a plain scalar, not a collection")]
    NotScalar(String),
    #[error("_message nests messages more than {MAX_NESTING} deep")]
    TooDeep,
    #[error("unknown field '{0}'")]
    UnknownField(String),
    #[error("field '{0}' appears twice")]
    Duplicate(String),
    #[error("field '{0}' is required")]
    Missing(&'static str),
    #[error(
        "_message_type '{0}' is not one of ACK, ALERT, CANNOT_ANSWER, QUERY, RESPONSE, ACTION_REQUEST, HUMAN"
    )]
    MessageType(String),
    /// The rule every transport's decoding keeps (`switchboard_types::strict`): no
    /// engine stores a NUL the same way (PostgreSQL refuses it), so it is refused where
    /// it comes in. A YAML double-quoted `"\0"` is one.
    #[error("a string may not contain U+0000 (NUL)")]
    Nul,
}

/// A scalar as the gate reads it: `None` for YAML's null spellings in plain style.
fn scalar_value(text: Cow<'_, str>, plain: bool) -> Result<Option<String>, BodyRefused> {
    if text.contains('\0') {
        return Err(BodyRefused::Nul);
    }
    if plain && matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL") {
        Ok(None)
    } else {
        Ok(Some(text.into_owned()))
    }
}

/// The gate: the body's fields if it is a plain `WiseAgentMessage`, the reason if not.
pub fn check(body: &[u8], max: usize) -> Result<WiseMessage, BodyRefused> {
    if body.len() > max {
        return Err(BodyRefused::TooLarge { max });
    }
    let text = std::str::from_utf8(body).map_err(|_| BodyRefused::NotUtf8)?;
    let mut events = Parser::new_from_str(text).filter(|e| {
        // Comments are presentation only.
        !matches!(e, Ok((Event::Comment(..), _)))
    });
    let mut next = move || -> Result<Event<'_>, BodyRefused> {
        match events.next() {
            Some(Ok((event, _))) => Ok(event),
            Some(Err(e)) => Err(BodyRefused::NotYaml(e.to_string())),
            None => Err(BodyRefused::NotAMessage),
        }
    };
    if !matches!(next()?, Event::StreamStart) || !matches!(next()?, Event::DocumentStart(..)) {
        return Err(BodyRefused::NotAMessage);
    }
    match next()? {
        Event::MappingStart(_, 0, Some(tag)) if tag.handle() == "!" && tag.suffix() == TAG => {}
        Event::MappingStart(_, 0, Some(tag)) => {
            return Err(BodyRefused::Tag(format!(
                "{}{}",
                tag.handle(),
                tag.suffix()
            )));
        }
        Event::MappingStart(_, anchor, _) if anchor != 0 => return Err(BodyRefused::Anchor),
        Event::MappingStart(_, _, None) => return Err(BodyRefused::NotAMessage),
        other => return Err(refusal(other, "the document")),
    }
    let message = fields(&mut next, 0)?;
    if !matches!(next()?, Event::DocumentEnd) || !matches!(next()?, Event::StreamEnd) {
        return Err(BodyRefused::NotAMessage);
    }
    Ok(message)
}

/// The fields of a message mapping whose start was read, through its end: each key a
/// known field once, each value a plain scalar — or, for `_message`, a mapping with the
/// message's tag, read the same way one level deeper.
fn fields<'a>(
    next: &mut impl FnMut() -> Result<Event<'a>, BodyRefused>,
    depth: usize,
) -> Result<WiseMessage, BodyRefused> {
    let mut message = WiseMessage::default();
    // A bit per field of FIELDS: the keys stay borrowed from the body, nothing is
    // allocated to remember them.
    let mut seen = 0_u8;
    loop {
        let key = match next()? {
            Event::MappingEnd => break,
            Event::Scalar(key, _, 0, None) if key.contains('\0') => return Err(BodyRefused::Nul),
            Event::Scalar(key, _, 0, None) => key,
            other => return Err(refusal(other, "a key")),
        };
        let bit = field_bit(&key);
        if seen & bit != 0 {
            return Err(BodyRefused::Duplicate(key.into_owned()));
        }
        match next()? {
            Event::Scalar(value, style, 0, None) => {
                let value = scalar_value(value, style == granit_parser::ScalarStyle::Plain)?;
                let slot = message
                    .field(&key)
                    .ok_or_else(|| BodyRefused::UnknownField(key.chars().take(64).collect()))?;
                *slot = value;
            }
            Event::MappingStart(_, 0, Some(tag))
                if key == "_message" && tag.handle() == "!" && tag.suffix() == TAG =>
            {
                if depth + 1 >= MAX_NESTING {
                    return Err(BodyRefused::TooDeep);
                }
                message.nested = Some(Box::new(fields(next, depth + 1)?));
            }
            other => return Err(refusal(other, &key)),
        }
        seen |= bit;
    }
    for name in REQUIRED {
        if seen & field_bit(name) == 0 {
            return Err(BodyRefused::Missing(name));
        }
    }
    if let Some(kind) = &message.message_type
        && !MESSAGE_TYPES.contains(&kind.as_str())
    {
        return Err(BodyRefused::MessageType(kind.chars().take(64).collect()));
    }
    Ok(message)
}

/// The bit of a field of [`FIELDS`] (none for another name).
fn field_bit(name: &str) -> u8 {
    FIELDS
        .iter()
        .position(|f| *f == name)
        .map_or(0, |at| 1 << at)
}

/// Why an event where a plain key or value (of field `at`) belongs is refused.
fn refusal(event: Event<'_>, at: &str) -> BodyRefused {
    match event {
        Event::Alias(..) | Event::UnresolvedAlias(..) | Event::Anchor(..) => BodyRefused::Anchor,
        Event::Scalar(_, _, anchor, _) | Event::MappingStart(_, anchor, _) if anchor != 0 => {
            BodyRefused::Anchor
        }
        Event::Scalar(_, _, _, Some(tag))
        | Event::MappingStart(_, _, Some(tag))
        | Event::SequenceStart(_, _, Some(tag)) => {
            BodyRefused::Tag(format!("{}{}", tag.handle(), tag.suffix()))
        }
        Event::SequenceStart(..) | Event::MappingStart(..) => BodyRefused::NotScalar(at.to_owned()),
        _ => BodyRefused::NotAMessage,
    }
}

#[cfg(test)]
mod tests;
