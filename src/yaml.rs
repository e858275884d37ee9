//! A YAML document as a small tree whose every node knows its line, for the files a person
//! writes (`serve --config`, and team files): an error names the line it is about, and a
//! file with several errors reports them all.
//!
//! Only what such files need is read: mappings with plain keys, sequences and scalars.
//! Anchors, aliases and tags are refused (a config file that points at itself is a
//! puzzle, not a setting), as are several documents in one file and a key given twice.

use std::borrow::Cow;

use granit_parser::{Event, Parser, ScalarStyle, Span};

/// A node of the document, with the (1-based) line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// A scalar: its text, and whether it was written plain (unquoted), which is what
    /// tells `true` the boolean from `"true"` the string.
    Scalar {
        text: String,
        plain: bool,
        line: usize,
    },
    Sequence {
        items: Vec<Node>,
        line: usize,
    },
    /// Entries in the file's order; keys are unique (checked when read).
    Mapping {
        entries: Vec<(String, Node)>,
        line: usize,
    },
}

/// Why a file could not be read as YAML, with the line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    pub line: usize,
    pub message: String,
}

impl Node {
    /// The line the node starts on.
    pub fn line(&self) -> usize {
        match self {
            Node::Scalar { line, .. }
            | Node::Sequence { line, .. }
            | Node::Mapping { line, .. } => *line,
        }
    }

    /// A plain `null`, `~` or nothing: YAML's ways to say "no value".
    pub fn is_null(&self) -> bool {
        matches!(self, Node::Scalar { text, plain: true, .. }
            if matches!(text.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// What kind of node it is, for an error message ("a list", "a mapping").
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Scalar { .. } => "a single value",
            Node::Sequence { .. } => "a list",
            Node::Mapping { .. } => "a mapping",
        }
    }
}

/// Reads `text` as one YAML document. An empty file is an empty mapping.
pub fn parse(text: &str) -> Result<Node, YamlError> {
    let mut events = Events {
        inner: Parser::new_from_str(text),
        last_line: 1,
    };
    let empty = |line: usize| Node::Mapping {
        entries: Vec::new(),
        line,
    };
    match events.next()? {
        (Event::StreamStart, _) => {}
        (_, line) => return Err(error(line, "not a YAML document")),
    }
    let root = match events.next()? {
        (Event::StreamEnd, _) => return Ok(empty(1)),
        (Event::DocumentStart(..), _) => match events.next()? {
            (Event::DocumentEnd, _) => empty(1),
            (event, line) => {
                let root = node(&mut events, event, line, 0)?;
                match events.next()? {
                    (Event::DocumentEnd, _) => root,
                    (_, line) => return Err(error(line, "more than one document in the file")),
                }
            }
        },
        (_, line) => return Err(error(line, "not a YAML document")),
    };
    match events.next()? {
        (Event::StreamEnd, _) => Ok(root),
        (_, line) => Err(error(line, "more than one document in the file")),
    }
}

/// How deep the file may nest: deeper is a mistake, not a setting.
const MAX_DEPTH: usize = 32;

struct Events<'a> {
    inner: Parser<'a, granit_parser::StrInput<'a>>,
    last_line: usize,
}

impl<'a> Events<'a> {
    /// The next event that is not a comment, with its line.
    fn next(&mut self) -> Result<(Event<'a>, usize), YamlError> {
        loop {
            match self.inner.next() {
                Some(Ok((Event::Comment(..), _))) => {}
                Some(Ok((event, span))) => {
                    self.last_line = line_of(&span);
                    return Ok((event, self.last_line));
                }
                Some(Err(e)) => {
                    let line = e.marker().line();
                    return Err(error(line, &format!("not YAML: {}", e.info())));
                }
                None => return Err(error(self.last_line, "the file ends early")),
            }
        }
    }
}

fn line_of(span: &Span) -> usize {
    span.start.line()
}

fn error(line: usize, message: &str) -> YamlError {
    YamlError {
        line,
        message: message.to_owned(),
    }
}

fn node<'a>(
    events: &mut Events<'a>,
    event: Event<'a>,
    line: usize,
    depth: usize,
) -> Result<Node, YamlError> {
    if depth > MAX_DEPTH {
        return Err(error(line, "nested too deeply"));
    }
    match event {
        Event::Scalar(text, style, anchor, tag) => {
            refuse_extras(anchor, tag.is_some(), line)?;
            Ok(Node::Scalar {
                text: scalar(text, line)?,
                plain: style == ScalarStyle::Plain,
                line,
            })
        }
        Event::SequenceStart(_, anchor, tag) => {
            refuse_extras(anchor, tag.is_some(), line)?;
            let mut items = Vec::new();
            loop {
                match events.next()? {
                    (Event::SequenceEnd, _) => break,
                    (event, at) => items.push(node(events, event, at, depth + 1)?),
                }
            }
            Ok(Node::Sequence { items, line })
        }
        Event::MappingStart(_, anchor, tag) => {
            refuse_extras(anchor, tag.is_some(), line)?;
            mapping(events, line, depth)
        }
        Event::Alias(_) => Err(error(line, "aliases (`*name`) are not read here")),
        _ => Err(error(line, "not a value")),
    }
}

fn mapping(events: &mut Events<'_>, line: usize, depth: usize) -> Result<Node, YamlError> {
    let mut entries: Vec<(String, Node)> = Vec::new();
    loop {
        let (key, at) = match events.next()? {
            (Event::MappingEnd, _) => break,
            (Event::Scalar(key, _, 0, None), at) => (scalar(key, at)?, at),
            (_, at) => return Err(error(at, "a key must be a plain name")),
        };
        if entries.iter().any(|(seen, _)| *seen == key) {
            return Err(error(at, &format!("`{key}` is given twice")));
        }
        let (event, value_line) = events.next()?;
        entries.push((key, node(events, event, value_line, depth + 1)?));
    }
    Ok(Node::Mapping { entries, line })
}

fn refuse_extras(anchor: usize, tagged: bool, line: usize) -> Result<(), YamlError> {
    if anchor != 0 {
        return Err(error(line, "anchors (`&name`) are not read here"));
    }
    if tagged {
        return Err(error(line, "tags (`!name`) are not read here"));
    }
    Ok(())
}

fn scalar(text: Cow<'_, str>, line: usize) -> Result<String, YamlError> {
    if text.contains('\0') {
        return Err(error(line, "a value may not contain U+0000 (NUL)"));
    }
    Ok(text.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str, plain: bool, line: usize) -> Node {
        Node::Scalar {
            text: text.to_owned(),
            plain,
            line,
        }
    }

    #[test]
    fn reads_mappings_lists_and_scalars_with_their_lines() {
        let doc =
            parse("# a comment\nlisten: 127.0.0.1:9000\nflag: true\nnames:\n  - a\n  - \"b\"\n")
                .expect("YAML");
        let Node::Mapping { entries, .. } = doc else {
            panic!("a mapping")
        };
        assert_eq!(
            entries[0],
            ("listen".into(), scalar("127.0.0.1:9000", true, 2))
        );
        assert_eq!(entries[1], ("flag".into(), scalar("true", true, 3)));
        let Node::Sequence { items, line } = &entries[2].1 else {
            panic!("a list")
        };
        assert_eq!(*line, 5);
        assert_eq!(items, &[scalar("a", true, 5), scalar("b", false, 6)]);
    }

    #[test]
    fn refuses_what_a_settings_file_has_no_use_for() {
        for (text, line, says) in [
            ("a: 1\na: 2\n", 2, "given twice"),
            ("a: &x 1\nb: *x\n", 1, "anchors"),
            ("a: !tag 1\n", 1, "tags"),
            ("a: 1\n---\nb: 2\n", 2, "more than one document"),
            ("a: [1, 2\n", 1, "not YAML"),
            ("? [a]\n: 1\n", 1, "plain name"),
        ] {
            let refused = parse(text).expect_err(text);
            assert_eq!(refused.line, line, "{text}: {refused}");
            assert!(refused.message.contains(says), "{text}: {refused}");
        }
    }

    #[test]
    fn an_empty_file_is_an_empty_mapping() {
        for text in ["", "# only a comment\n"] {
            assert_eq!(
                parse(text),
                Ok(Node::Mapping {
                    entries: Vec::new(),
                    line: 1
                })
            );
        }
    }
}
