//! STOMP frames on the wire (1.0, 1.1 and 1.2), as a tokio-util codec.
//!
//! Written here because the crates on the registry refuse what stomp.py sends (the
//! `STOMP` command, frames without `host`, heart-beat newlines between frames). The
//! rules, from the specification (<https://stomp.github.io/stomp-specification-1.2.html>):
//!
//! * a frame is a command line, header lines, an empty line, the body and a NUL; lines
//!   end in LF or CRLF;
//! * EOLs between frames are heart-beats (any bytes count as liveness);
//! * with `content-length` the body is exactly that many bytes (it may hold NULs) and a
//!   NUL follows; without it the body ends at the first NUL;
//! * header names and values are escaped in 1.1 (`\\`, `\n`, `\c`) and 1.2 (also `\r`);
//!   an undefined escape is an error; CONNECT and CONNECTED are never escaped, and 1.0
//!   escapes nothing;
//! * a repeated header: the first one counts.
//!
//! Limits on frame size, header count and header length are the server's; passing one is
//! a [`FrameError`] that names it, which the session answers with an `ERROR` frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

/// A protocol version, which decides header escaping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    V1_0,
    V1_1,
    V1_2,
}

impl Version {
    /// As `accept-version` and `version` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V1_0 => "1.0",
            Version::V1_1 => "1.1",
            Version::V1_2 => "1.2",
        }
    }

    /// The highest version both sides speak, from a client's `accept-version` (absent:
    /// a 1.0 client).
    pub fn negotiate(accept: Option<&str>) -> Option<Version> {
        let Some(accept) = accept else {
            return Some(Version::V1_0);
        };
        accept
            .split(',')
            .filter_map(|v| match v.trim() {
                "1.0" => Some(Version::V1_0),
                "1.1" => Some(Version::V1_1),
                "1.2" => Some(Version::V1_2),
                _ => None,
            })
            .max()
    }
}

/// Every STOMP command, client's and server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Connect,
    Stomp,
    Send,
    Subscribe,
    Unsubscribe,
    Ack,
    Nack,
    Begin,
    Commit,
    Abort,
    Disconnect,
    Connected,
    Message,
    Receipt,
    Error,
}

impl Command {
    const ALL: [Command; 15] = [
        Command::Connect,
        Command::Stomp,
        Command::Send,
        Command::Subscribe,
        Command::Unsubscribe,
        Command::Ack,
        Command::Nack,
        Command::Begin,
        Command::Commit,
        Command::Abort,
        Command::Disconnect,
        Command::Connected,
        Command::Message,
        Command::Receipt,
        Command::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Command::Connect => "CONNECT",
            Command::Stomp => "STOMP",
            Command::Send => "SEND",
            Command::Subscribe => "SUBSCRIBE",
            Command::Unsubscribe => "UNSUBSCRIBE",
            Command::Ack => "ACK",
            Command::Nack => "NACK",
            Command::Begin => "BEGIN",
            Command::Commit => "COMMIT",
            Command::Abort => "ABORT",
            Command::Disconnect => "DISCONNECT",
            Command::Connected => "CONNECTED",
            Command::Message => "MESSAGE",
            Command::Receipt => "RECEIPT",
            Command::Error => "ERROR",
        }
    }

    /// The command a frame's first line names (case matters, as in the specification).
    pub fn parse(name: &str) -> Option<Command> {
        Command::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// CONNECT, STOMP and CONNECTED carry their headers unescaped in every version.
    fn escapes(self) -> bool {
        !matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub command: Command,
    /// In order, repeats kept (the first of a name is the one that counts).
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

impl Frame {
    pub fn new(command: Command) -> Frame {
        Frame {
            command,
            headers: Vec::new(),
            body: Bytes::new(),
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Frame {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    pub fn body(mut self, body: impl Into<Bytes>) -> Frame {
        self.body = body.into();
        self
    }

    /// The value of the first header called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a read yields: a frame, or a heart-beat (EOLs between frames).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Frame(Frame),
    HeartBeat,
}

/// The server's bounds on what a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame: command, headers and body.
    pub max_frame_bytes: usize,
    pub max_headers: usize,
    /// Longest header line (name, colon and value, escaped).
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_frame_bytes: 1024 * 1024,
            max_headers: 64,
            max_header_bytes: 8 * 1024,
        }
    }
}

/// Why a frame could not be read; its text is the `ERROR` frame's `message` header.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame too large: at most {max} bytes")]
    TooLarge { max: usize },
    #[error("too many headers: at most {max}")]
    TooManyHeaders { max: usize },
    #[error("header too long: at most {max} bytes")]
    HeaderTooLong { max: usize },
    #[error("unknown command '{0}'")]
    UnknownCommand(String),
    #[error("malformed header line '{0}': a header is name:value")]
    MalformedHeader(String),
    #[error("undefined escape sequence '\\{0}' in a header")]
    BadEscape(char),
    #[error("content-length '{0}' is not a number of bytes")]
    BadContentLength(String),
    #[error("the body of content-length {0} is not followed by a NUL octet")]
    MissingNul(usize),
    #[error("headers are not UTF-8")]
    NotUtf8,
    #[error("a NUL octet in a header: NUL only ends a frame")]
    NulInHeader,
    #[error("read failed: {0}")]
    Io(String),
}

impl From<std::io::Error> for FrameError {
    fn from(e: std::io::Error) -> FrameError {
        FrameError::Io(e.to_string())
    }
}

/// The codec: frames in and out for one connection, at its negotiated version.
#[derive(Debug, Clone)]
pub struct StompCodec {
    /// Until CONNECTED, 1.2's parsing (CONNECT frames are unescaped anyway).
    pub version: Version,
    pub limits: Limits,
}

impl StompCodec {
    pub fn new(limits: Limits) -> StompCodec {
        StompCodec {
            version: Version::V1_2,
            limits,
        }
    }
}

/// Where the head (command and headers) ends: the index after its empty line.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') {
        let line_end = at + nl;
        let line = &buf[at..line_end];
        if line.is_empty() || line == b"\r" {
            // The command line cannot be empty: leading EOLs were taken as heart-beats.
            if at > 0 {
                return Some(line_end + 1);
            }
        }
        at = line_end + 1;
    }
    None
}

fn unescape(text: &str, version: Version, command: Command) -> Result<String, FrameError> {
    if version == Version::V1_0 || !command.escapes() || !text.contains('\\') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('c') => out.push(':'),
            Some('r') if version == Version::V1_2 => out.push('\r'),
            Some(other) => return Err(FrameError::BadEscape(other)),
            None => return Err(FrameError::BadEscape(' ')),
        }
    }
    Ok(out)
}

/// Whether `text` can be written as a header name or value in `version`: a NUL never (it
/// ends the frame, and no version escapes it); a line end only where escaping exists
/// (1.1 and 1.2, outside CONNECT/CONNECTED), and a carriage return only in 1.2.
fn writable(text: &str, version: Version, command: Command) -> bool {
    let escaped = version != Version::V1_0 && command.escapes();
    // Bytes, not chars: the three that matter are ASCII, never inside a multi-byte one.
    text.bytes().all(|b| match b {
        b'\0' => false,
        b'\n' => escaped,
        b'\r' => escaped && version == Version::V1_2,
        _ => true,
    })
}

fn escape_into(out: &mut BytesMut, text: &str, version: Version, command: Command) {
    if version == Version::V1_0 || !command.escapes() {
        out.put_slice(text.as_bytes());
        return;
    }
    for c in text.chars() {
        match c {
            '\\' => out.put_slice(b"\\\\"),
            '\n' => out.put_slice(b"\\n"),
            ':' => out.put_slice(b"\\c"),
            '\r' if version == Version::V1_2 => out.put_slice(b"\\r"),
            c => {
                let mut utf8 = [0u8; 4];
                out.put_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
    }
}

/// Parses a complete head (without its final empty line).
fn parse_head(
    head: &[u8],
    version: Version,
    limits: &Limits,
) -> Result<(Command, Vec<(String, String)>), FrameError> {
    let text = std::str::from_utf8(head).map_err(|_| FrameError::NotUtf8)?;
    // No version can write a NUL in a header (it ends the frame): one read here could
    // never be passed on, so it is not accepted either.
    if text.contains('\0') {
        return Err(FrameError::NulInHeader);
    }
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let name = lines.next().unwrap_or_default();
    let command = Command::parse(name)
        .ok_or_else(|| FrameError::UnknownCommand(name.chars().take(32).collect()))?;
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        if line.len() > limits.max_header_bytes {
            return Err(FrameError::HeaderTooLong {
                max: limits.max_header_bytes,
            });
        }
        if headers.len() == limits.max_headers {
            return Err(FrameError::TooManyHeaders {
                max: limits.max_headers,
            });
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| FrameError::MalformedHeader(line.chars().take(64).collect()))?;
        let (name, value) = (
            unescape(name, version, command)?,
            unescape(value, version, command)?,
        );
        // What this version cannot write back (a bare carriage return where nothing is
        // escaped) is not read either: every header read can be passed on as it came.
        if !writable(&name, version, command) || !writable(&value, version, command) {
            return Err(FrameError::MalformedHeader(line.chars().take(64).collect()));
        }
        headers.push((name, value));
    }
    Ok((command, headers))
}

impl Decoder for StompCodec {
    type Item = Incoming;
    type Error = FrameError;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Incoming>, FrameError> {
        // EOLs before a command are heart-beats.
        let eols = buf
            .iter()
            .take_while(|&&b| b == b'\n' || b == b'\r')
            .count();
        if eols > 0 && (eols < buf.len() || buf[eols - 1] == b'\n') {
            buf.advance(eols);
            return Ok(Some(Incoming::HeartBeat));
        }
        let Some(head_len) = head_end(buf) else {
            if buf.len() > self.limits.max_frame_bytes {
                return Err(FrameError::TooLarge {
                    max: self.limits.max_frame_bytes,
                });
            }
            return Ok(None);
        };
        let (command, headers) = parse_head(&buf[..head_len], self.version, &self.limits)?;
        let length = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map(|(_, v)| {
                v.trim()
                    .parse::<usize>()
                    .map_err(|_| FrameError::BadContentLength(v.clone()))
            })
            .transpose()?;
        let body_len = match length {
            Some(len) => {
                // Checked: a content-length near usize::MAX must not wrap past the limit.
                let whole = head_len.checked_add(len).and_then(|n| n.checked_add(1));
                if whole.is_none_or(|n| n > self.limits.max_frame_bytes) {
                    return Err(FrameError::TooLarge {
                        max: self.limits.max_frame_bytes,
                    });
                }
                if buf.len() < head_len + len + 1 {
                    buf.reserve(head_len + len + 1 - buf.len());
                    return Ok(None);
                }
                if buf[head_len + len] != 0 {
                    return Err(FrameError::MissingNul(len));
                }
                len
            }
            None => match buf[head_len..].iter().position(|&b| b == 0) {
                Some(len) => len,
                None if buf.len() > self.limits.max_frame_bytes => {
                    return Err(FrameError::TooLarge {
                        max: self.limits.max_frame_bytes,
                    });
                }
                None => return Ok(None),
            },
        };
        if head_len + body_len + 1 > self.limits.max_frame_bytes {
            return Err(FrameError::TooLarge {
                max: self.limits.max_frame_bytes,
            });
        }
        buf.advance(head_len);
        let body = buf.split_to(body_len).freeze();
        buf.advance(1);
        Ok(Some(Incoming::Frame(Frame {
            command,
            headers,
            body,
        })))
    }
}

/// Frames out, and `None` for a heart-beat (one EOL).
impl Encoder<Option<Frame>> for StompCodec {
    type Error = FrameError;

    fn encode(&mut self, frame: Option<Frame>, out: &mut BytesMut) -> Result<(), FrameError> {
        let Some(frame) = frame else {
            out.put_u8(b'\n');
            return Ok(());
        };
        out.reserve(64 + frame.body.len());
        out.put_slice(frame.command.as_str().as_bytes());
        out.put_u8(b'\n');
        for (name, value) in &frame.headers {
            // A header this version cannot carry as it is would end the frame early or
            // start a forged header: it is left out, never written raw.
            if !writable(name, self.version, frame.command)
                || !writable(value, self.version, frame.command)
            {
                tracing::warn!(header = %name.escape_debug(), "a header that cannot be written in this STOMP version was left out");
                continue;
            }
            escape_into(out, name, self.version, frame.command);
            out.put_u8(b':');
            escape_into(out, value, self.version, frame.command);
            out.put_u8(b'\n');
        }
        out.put_u8(b'\n');
        out.put_slice(&frame.body);
        out.put_u8(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
