//! The codec against the specification's examples and the frames stomp.py (Wise Agents)
//! sends.

use bytes::BytesMut;
use tokio_util::codec::{Decoder, Encoder};

use super::*;

fn decode_all(codec: &mut StompCodec, wire: &[u8]) -> Result<Vec<Incoming>, FrameError> {
    let mut buf = BytesMut::from(wire);
    let mut out = Vec::new();
    while let Some(item) = codec.decode(&mut buf)? {
        out.push(item);
    }
    assert!(buf.is_empty(), "left over: {buf:?}");
    Ok(out)
}

fn frame(wire: &[u8]) -> Frame {
    let mut codec = StompCodec::new(Limits::default());
    match decode_all(&mut codec, wire).expect("decodes").as_slice() {
        [Incoming::Frame(f)] => f.clone(),
        other => panic!("one frame expected: {other:?}"),
    }
}

#[test]
fn the_specifications_connect_and_send() {
    let f = frame(b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\0");
    assert_eq!(f.command, Command::Connect);
    assert_eq!(f.get("accept-version"), Some("1.2"));
    assert_eq!(f.get("host"), Some("stomp.github.org"));
    assert!(f.body.is_empty());
    let f = frame(b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\0");
    assert_eq!(f.command, Command::Send);
    assert_eq!(&f.body[..], b"hello queue a\n");
}

#[test]
fn what_wise_agents_sends_through_stomp_py() {
    // The STOMP command, accept-version 1.1, heart-beats, no host, then SEND with only a
    // destination and content-length, and heart-beat newlines in between.
    let body = b"!wiseagents.WiseAgentMessage\n_message: hi\n";
    let mut wire = b"STOMP\naccept-version:1.1\nheart-beat:60000,60000\n\n\0\n".to_vec();
    wire.extend_from_slice(
        format!(
            "SEND\ndestination:/queue/request/Bob\ncontent-length:{}\n\n",
            body.len()
        )
        .as_bytes(),
    );
    wire.extend_from_slice(body);
    wire.extend_from_slice(b"\0\n\n");
    let mut codec = StompCodec::new(Limits::default());
    let items = decode_all(&mut codec, &wire).expect("decodes");
    assert_eq!(items.len(), 4, "{items:?}");
    let Incoming::Frame(connect) = &items[0] else {
        panic!("{items:?}")
    };
    assert_eq!(connect.command, Command::Stomp);
    assert_eq!(connect.get("heart-beat"), Some("60000,60000"));
    assert_eq!(items[1], Incoming::HeartBeat);
    let Incoming::Frame(send) = &items[2] else {
        panic!("{items:?}")
    };
    assert_eq!(&send.body[..], body);
    assert_eq!(items[3], Incoming::HeartBeat);
}

#[test]
fn content_length_bodies_may_hold_nuls_and_crlf_lines_are_accepted() {
    let f = frame(b"SEND\r\ndestination:/queue/a\r\ncontent-length:5\r\n\r\na\0b\0c\0");
    assert_eq!(&f.body[..], b"a\0b\0c");
    assert_eq!(f.get("destination"), Some("/queue/a"));
    let mut codec = StompCodec::new(Limits::default());
    assert_eq!(
        decode_all(&mut codec, b"SEND\ncontent-length:2\n\nabc\0"),
        Err(FrameError::MissingNul(2))
    );
    assert_eq!(
        decode_all(&mut codec, b"SEND\ncontent-length:two\n\nab\0"),
        Err(FrameError::BadContentLength("two".into()))
    );
}

#[test]
fn frames_arrive_in_pieces() {
    let wire = b"SEND\ndestination:/queue/a\ncontent-length:3\n\nabc\0";
    let mut codec = StompCodec::new(Limits::default());
    let mut buf = BytesMut::new();
    for (i, byte) in wire.iter().enumerate() {
        buf.extend_from_slice(&[*byte]);
        let got = codec.decode(&mut buf).expect("decodes");
        assert_eq!(got.is_some(), i == wire.len() - 1, "at byte {i}");
    }
}

#[test]
fn headers_escape_per_version_and_the_first_repeat_counts() {
    let f = frame(b"MESSAGE\nfoo:a\\cb\\nc\\\\d\\re\nfoo:second\n\n\0");
    assert_eq!(f.get("foo"), Some("a:b\nc\\d\re"));
    assert_eq!(f.headers.len(), 2);
    // \r is 1.2's; 1.1 refuses it, as any undefined escape.
    let mut v11 = StompCodec::new(Limits::default());
    v11.version = Version::V1_1;
    assert_eq!(
        decode_all(&mut v11, b"SEND\nfoo:a\\rb\n\n\0"),
        Err(FrameError::BadEscape('r'))
    );
    assert_eq!(
        decode_all(&mut v11, b"SEND\nfoo:a\\tb\n\n\0"),
        Err(FrameError::BadEscape('t'))
    );
    // 1.0 and CONNECT frames take backslashes as they are.
    let mut v10 = StompCodec::new(Limits::default());
    v10.version = Version::V1_0;
    let items = decode_all(&mut v10, b"SEND\nfoo:a\\tb\n\n\0").expect("1.0");
    assert!(matches!(&items[0], Incoming::Frame(f) if f.get("foo") == Some("a\\tb")));
    let f = frame(b"CONNECT\npasscode:se\\cret\n\n\0");
    assert_eq!(f.get("passcode"), Some("se\\cret"));
}

#[test]
fn encoding_round_trips_every_version() {
    for version in [Version::V1_0, Version::V1_1, Version::V1_2] {
        let mut codec = StompCodec::new(Limits::default());
        codec.version = version;
        let value = if version == Version::V1_0 {
            "plain value".to_owned()
        } else {
            "a:b\nc\\d".to_owned() + if version == Version::V1_2 { "\r" } else { "" }
        };
        let sent = Frame::new(Command::Message)
            .header("destination", "/queue/request/Bob")
            .header("x-odd", value)
            .body(&b"body\0with nul"[..]);
        let mut sent = sent.clone().header("content-length", "13");
        sent.headers.rotate_right(1);
        let mut out = BytesMut::new();
        codec.encode(Some(sent.clone()), &mut out).expect("encodes");
        codec.encode(None, &mut out).expect("heart-beat");
        let items = decode_all(&mut codec, &out).expect("decodes");
        assert_eq!(
            items,
            [Incoming::Frame(sent), Incoming::HeartBeat],
            "{version:?}"
        );
    }
}

/// A header its version cannot carry as it is — a line end in 1.0 (nothing is escaped),
/// a NUL in any (it ends the frame), a carriage return before 1.2 — is left out, never
/// written raw: the frame that reaches the client has only the headers written.
#[test]
fn a_header_a_version_cannot_carry_is_left_out() {
    for (version, value) in [
        (Version::V1_0, "text/plain\nswitchboard-sender:ceo"),
        (Version::V1_1, "text/plain\0MESSAGE"),
        (Version::V1_1, "text/plain\r"),
        (Version::V1_2, "a\0b"),
    ] {
        let mut codec = StompCodec::new(Limits::default());
        codec.version = version;
        let sent = Frame::new(Command::Message)
            .header("switchboard-sender", "a")
            .header("content-type", value)
            .body(&b"hi"[..]);
        let mut out = BytesMut::new();
        codec.encode(Some(sent), &mut out).expect("encodes");
        let items = decode_all(&mut codec, &out).expect("decodes");
        let [Incoming::Frame(got)] = &items[..] else {
            panic!("{version:?}: one frame, got {items:?}");
        };
        assert_eq!(
            got.headers,
            [("switchboard-sender".to_owned(), "a".to_owned())],
            "{version:?}"
        );
    }
}

#[test]
fn limits_say_which() {
    let limits = Limits {
        max_frame_bytes: 64,
        max_headers: 2,
        max_header_bytes: 24,
    };
    let mut codec = StompCodec::new(limits);
    assert_eq!(
        decode_all(&mut codec, b"SEND\na:1\nb:2\nc:3\n\n\0"),
        Err(FrameError::TooManyHeaders { max: 2 })
    );
    assert_eq!(
        decode_all(&mut codec, b"SEND\nname:a-much-longer-value-here\n\n\0"),
        Err(FrameError::HeaderTooLong { max: 24 })
    );
    let big = [b"SEND\n\n".as_slice(), &[b'x'; 100], b"\0"].concat();
    assert_eq!(
        decode_all(&mut codec, &big),
        Err(FrameError::TooLarge { max: 64 })
    );
    let declared = b"SEND\ncontent-length:1000\n\n";
    assert_eq!(
        decode_all(&mut codec, declared),
        Err(FrameError::TooLarge { max: 64 })
    );
    // Found by the fuzzer: a length that would wrap the sum past the limit.
    let wrapping = b"SEND\ncontent-length:18446744073709551606\n\nhello\0";
    let mut roomy = StompCodec::new(Limits {
        max_header_bytes: 64,
        ..limits
    });
    assert_eq!(
        decode_all(&mut roomy, wrapping),
        Err(FrameError::TooLarge { max: 64 })
    );
    assert_eq!(
        decode_all(&mut codec, b"TELEPORT\n\n\0"),
        Err(FrameError::UnknownCommand("TELEPORT".into()))
    );
    assert_eq!(
        decode_all(&mut codec, b"SEND\nno colon here\n\n\0"),
        Err(FrameError::MalformedHeader("no colon here".into()))
    );
}

#[test]
fn versions_negotiate_to_the_highest_shared() {
    assert_eq!(Version::negotiate(None), Some(Version::V1_0));
    assert_eq!(Version::negotiate(Some("1.1")), Some(Version::V1_1));
    assert_eq!(Version::negotiate(Some("1.0,1.1,1.2")), Some(Version::V1_2));
    assert_eq!(Version::negotiate(Some("1.2, 1.1")), Some(Version::V1_2));
    assert_eq!(Version::negotiate(Some("2.0")), None);
}
