//! Leases on named resources: an agent says "I am working on this — keep off" for a
//! while, and every other agent of its team can see it and is refused an overlapping
//! exclusive claim.
//!
//! A resource is a name (a ticket id, a table) or a path pattern (`src/**`,
//! `docs/*.md`). Two resources overlap when some path matches both: `*` stands for any
//! text inside one segment, `**` for any number of whole segments, everything else for
//! itself. Leases of one holder never conflict with each other; shared leases coexist
//! with shared ones, never with an exclusive one (`docs/leases.md`).

use serde::{Deserialize, Serialize};

use crate::error::ErrorBody;
use crate::ids::{AgentId, LeaseId, TeamId};
use crate::time::Timestamp;

/// A lease's time to live when the request names none: five minutes.
pub const DEFAULT_TTL_SECONDS: u64 = 300;
/// The longest a lease lives without being extended: one day.
pub const MAX_TTL_SECONDS: u64 = 86_400;
/// The longest resource name or pattern, in characters.
pub const MAX_RESOURCE_CHARS: usize = 512;
/// The most segments (`/`-separated) a resource has.
pub const MAX_RESOURCE_SEGMENTS: usize = 32;
/// The longest reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// The most live leases one agent holds.
pub const MAX_LEASES_PER_AGENT: usize = 100;
/// The most live leases one team holds.
pub const MAX_LEASES_PER_TEAM: usize = 10_000;

/// [`Pattern::parse`]'s rule as a JSON Schema pattern (ECMA-262 and Python's `re` read it
/// alike, without look-ahead): 1–32 segments split at `/`, each `**`, `*`, or text with
/// no control character in which stars stand alone (the length is the schema's
/// `maxLength`). A rule the document did not state was a request a generated client
/// built and the server refused (the spec fuzzer sent `""`).
pub const RESOURCE_PATTERN: &str = concat!(
    r"^(?:\*\*|\*|\*?[^/*\u0000-\u001f\u007f-\u009f]+(?:\*[^/*\u0000-\u001f\u007f-\u009f]+)*\*?)",
    r"(?:/(?:\*\*|\*|\*?[^/*\u0000-\u001f\u007f-\u009f]+(?:\*[^/*\u0000-\u001f\u007f-\u009f]+)*\*?)){0,31}$"
);

/// `PUT /v1/teams/{team_id}/leases`: take a lease, as the calling agent.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AcquireLease {
    /// A name or a path pattern (`*` within a segment, `**` across segments).
    #[cfg_attr(
        feature = "openapi",
        schema(example = "src/store/**", max_length = 512)
    )]
    pub resource: String,
    /// How long the lease lives unless extended (default 300, at most 86,400).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 600, minimum = 1, maximum = 86400)
    )]
    pub ttl_seconds: Option<u64>,
    /// Whether others are kept off entirely (default), or only exclusive holders are.
    #[serde(default)]
    pub exclusive: Option<bool>,
    /// Why, for the others who meet it (at most 500 characters).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "moving the store to an enum"))]
    pub reason: Option<String>,
}

/// `POST /v1/teams/{team_id}/leases/{lease_id}/extend`: the holder renews.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExtendLease {
    /// The new time to live, counted from now (default: the lease's own).
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(example = 600, minimum = 1, maximum = 86400)
    )]
    pub ttl_seconds: Option<u64>,
}

/// `GET /v1/teams/{team_id}/leases`: the team's live leases, optionally only one
/// holder's or only those overlapping a resource.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams, utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct LeaseQuery {
    /// Only this agent's leases.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, example = "coder-1"))]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub holder: Option<AgentId>,
    /// Only leases whose resource overlaps this name or pattern.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(example = "src/main.rs"))]
    pub resource: Option<String>,
}

/// A live lease.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Lease {
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "lease_0192f3c4a1b27c3e9d5e8f1a2b3c4d5e"))]
    pub lease_id: LeaseId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// The agent that holds it.
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "coder-1"))]
    pub holder: AgentId,
    pub resource: String,
    pub exclusive: bool,
    pub reason: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub acquired_at: Timestamp,
    /// When it ends unless extended.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub expires_at: Timestamp,
}

/// The answer to a grant, an extension or a release: the lease as it now stands (for a
/// release, as it was).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseEnvelope {
    pub lease: Lease,
}

/// The team's live leases, oldest first.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseList {
    pub leases: Vec<Lease>,
}

/// One holder in a `LEASE_CONFLICT` refusal's `details.conflicts`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaseConflict {
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub lease_id: LeaseId,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub holder: AgentId,
    pub resource: String,
    pub exclusive: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub expires_at: Timestamp,
}

/// The tag a team's lease events are published under: an agent that watches it
/// (`PUT /v1/watch`, `set_watch`, or `watch` at registration) gets every grant,
/// extension, release, conflict and end of its team's leases in its inbox, pushed live
/// on whatever transport it listens by and replayed after it was away. Nobody else
/// gets them, and a team nobody watches pays nothing for them.
pub const LEASE_EVENTS_TAG: &str = "switchboard.lease";

/// What happened to a lease: the `instruct_content` of a lease event (and
/// `content.data`, beside `"type": "lease_event"`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct LeaseEvent {
    pub event: LeaseEventKind,
    /// The lease as it now stands (as it was, once ended); for a conflict, the lease that
    /// was asked for and not granted.
    pub lease: Lease,
    /// For a conflict: the leases that kept it off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<LeaseConflict>,
    /// Why it ended, when not by its holder or its time: `released by the team key`,
    /// `the holder was removed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The kinds of lease event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseEventKind {
    Granted,
    Extended,
    Released,
    Expired,
    Conflict,
}

impl LeaseEventKind {
    /// The word a lease event's text starts with.
    pub fn name(self) -> &'static str {
        match self {
            LeaseEventKind::Granted => "granted",
            LeaseEventKind::Extended => "extended",
            LeaseEventKind::Released => "released",
            LeaseEventKind::Expired => "expired",
            LeaseEventKind::Conflict => "conflict",
        }
    }
}

impl From<Lease> for LeaseConflict {
    fn from(l: Lease) -> LeaseConflict {
        LeaseConflict {
            lease_id: l.lease_id,
            holder: l.holder,
            resource: l.resource,
            exclusive: l.exclusive,
            expires_at: l.expires_at,
        }
    }
}

/// A resource checked: its segments, each split at its `*`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    segments: Vec<Segment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// `**`: any number of whole segments, none included.
    Any,
    /// Text with `*` standing for any text inside the segment.
    Glob(Vec<Part>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Star,
    Char(char),
}

impl Pattern {
    /// The one parser for a resource a client names: 1–512 characters, at most 32 segments,
    /// no empty segment, no control character, `**` only as a whole segment.
    pub fn parse(field: &str, text: &str) -> Result<Pattern, ErrorBody> {
        let refuse = |why: &str| Err(ErrorBody::validation(field, why.to_owned()));
        if text.is_empty() || text.chars().count() > MAX_RESOURCE_CHARS {
            return refuse("a resource is 1 to 512 characters");
        }
        if text.chars().any(char::is_control) {
            return refuse("a resource has no control characters");
        }
        let raw: Vec<&str> = text.split('/').collect();
        if raw.len() > MAX_RESOURCE_SEGMENTS {
            return refuse("a resource has at most 32 segments");
        }
        let mut segments = Vec::with_capacity(raw.len());
        for segment in raw {
            if segment.is_empty() {
                return refuse(
                    "a resource has no empty segment (no leading, trailing or double '/')",
                );
            }
            if segment == "**" {
                // `a/**/**` is `a/**`.
                if segments.last() != Some(&Segment::Any) {
                    segments.push(Segment::Any);
                }
                continue;
            }
            if segment.contains("**") {
                return refuse("'**' stands alone as a segment ('src/**', not 'src/a**')");
            }
            let parts = segment
                .chars()
                .map(|c| if c == '*' { Part::Star } else { Part::Char(c) })
                .collect();
            segments.push(Segment::Glob(parts));
        }
        Ok(Pattern { segments })
    }

    /// The leading segments of `text` that hold no `*` (`src/a` of `src/a/*.rs`; empty
    /// for `*.md`), as it was written. Two resources overlap only when one's literal
    /// prefix is a segment-wise prefix of the other's (a literal segment matches only
    /// itself), which is what lets the store read just the leases that may conflict
    /// instead of every live lease of the team.
    pub fn literal_prefix(text: &str) -> &str {
        let mut end = 0;
        for (i, segment) in text.split('/').enumerate() {
            if segment.contains('*') {
                break;
            }
            end = if i == 0 {
                segment.len()
            } else {
                end + 1 + segment.len()
            };
        }
        &text[..end]
    }

    /// The literal prefixes a lease must have to possibly overlap a resource with
    /// `prefix`, besides those that extend it: `prefix` itself and each of its
    /// segment-wise prefixes, the empty one included.
    pub fn enclosing_prefixes(prefix: &str) -> Vec<&str> {
        let mut out = vec![""];
        if !prefix.is_empty() {
            out.extend(prefix.match_indices('/').map(|(i, _)| &prefix[..i]));
            out.push(prefix);
        }
        out
    }

    /// Whether some path matches both patterns.
    pub fn overlaps(&self, other: &Pattern) -> bool {
        let mut memo = vec![vec![None; other.segments.len() + 1]; self.segments.len() + 1];
        overlap_segments(&self.segments, &other.segments, 0, 0, &mut memo)
    }
}

fn overlap_segments(
    a: &[Segment],
    b: &[Segment],
    i: usize,
    j: usize,
    memo: &mut Vec<Vec<Option<bool>>>,
) -> bool {
    if let Some(known) = memo[i][j] {
        return known;
    }
    let answer = match (a.get(i), b.get(j)) {
        (None, None) => true,
        (Some(Segment::Any), _) => {
            overlap_segments(a, b, i + 1, j, memo)
                || (j < b.len() && overlap_segments(a, b, i, j + 1, memo))
        }
        (_, Some(Segment::Any)) => {
            overlap_segments(a, b, i, j + 1, memo)
                || (i < a.len() && overlap_segments(a, b, i + 1, j, memo))
        }
        (Some(Segment::Glob(x)), Some(Segment::Glob(y))) => {
            overlap_glob(x, y) && overlap_segments(a, b, i + 1, j + 1, memo)
        }
        _ => false,
    };
    memo[i][j] = Some(answer);
    answer
}

/// Whether some text (without `/`) matches both segment globs.
fn overlap_glob(x: &[Part], y: &[Part]) -> bool {
    // reach[i][j]: the prefixes x[..i] and y[..j] can produce the same text.
    let mut reach = vec![vec![false; y.len() + 1]; x.len() + 1];
    reach[0][0] = true;
    for i in 0..=x.len() {
        for j in 0..=y.len() {
            if !reach[i][j] {
                continue;
            }
            match (x.get(i), y.get(j)) {
                (Some(Part::Star), _) => {
                    // The star ends here, or eats what the other side produces next.
                    reach[i + 1][j] = true;
                    if j < y.len() {
                        reach[i][j + 1] = true;
                    }
                }
                (_, Some(Part::Star)) => {
                    reach[i][j + 1] = true;
                    if i < x.len() {
                        reach[i + 1][j] = true;
                    }
                }
                (Some(Part::Char(c)), Some(Part::Char(d))) if c == d => reach[i + 1][j + 1] = true,
                _ => {}
            }
        }
    }
    reach[x.len()][y.len()]
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    fn overlap(a: &str, b: &str) -> bool {
        let (a, b) = (
            Pattern::parse("resource", a).expect("a"),
            Pattern::parse("resource", b).expect("b"),
        );
        assert_eq!(a.overlaps(&b), b.overlaps(&a), "overlap is symmetric");
        a.overlaps(&b)
    }

    #[test]
    fn patterns_overlap_as_paths_do() {
        for (a, b) in OVERLAPPING {
            assert!(overlap(a, b), "{a} and {b} overlap");
        }
        for (a, b) in [
            ("src/**", "docs/x.md"),
            ("docs/*.md", "docs/a.rs"),
            ("docs/*.md", "docs/sub/a.md"),
            ("TICKET-42", "TICKET-43"),
            ("a/*/z", "a/b/c/z"),
            ("*", "a/b"),
            ("src/a*", "src/b*"),
        ] {
            assert!(!overlap(a, b), "{a} and {b} do not overlap");
        }
    }

    /// The store reads only the leases whose literal prefix encloses or extends the asked
    /// one's; if two patterns could overlap without that, a conflict would be missed.
    #[test]
    fn overlapping_patterns_have_related_literal_prefixes() {
        let mut pool: Vec<&str> = OVERLAPPING.iter().flat_map(|(a, b)| [*a, *b]).collect();
        pool.extend([
            "src",
            "src/main.rs",
            "src/main.rs/x",
            "srcx/**",
            "src/*",
            "*/main.rs",
            "a/b",
            "a/b/c",
            "a/bc",
            "a/**",
            "**/b",
            "x*/y",
            "a/b*/c",
        ]);
        for a in &pool {
            for b in &pool {
                let (pa, pb) = (Pattern::literal_prefix(a), Pattern::literal_prefix(b));
                // As the store reads: an empty prefix reads every lease.
                let related = pa.is_empty()
                    || Pattern::enclosing_prefixes(pa).contains(&pb)
                    || pb
                        .strip_prefix(pa)
                        .is_some_and(|rest| rest.starts_with('/'));
                if overlap(a, b) {
                    assert!(related, "{a} ({pa:?}) and {b} ({pb:?}) overlap");
                }
            }
        }
        assert_eq!(Pattern::literal_prefix("src/a/*.rs"), "src/a");
        assert_eq!(Pattern::literal_prefix("*.md"), "");
        assert_eq!(Pattern::literal_prefix("a/b"), "a/b");
        assert_eq!(Pattern::enclosing_prefixes("a/b"), ["", "a", "a/b"]);
        assert_eq!(Pattern::enclosing_prefixes(""), [""]);
    }

    const OVERLAPPING: [(&str, &str); 12] = [
        ("src/**", "src/main.rs"),
        ("src/**", "src"),
        ("src/**", "src/store/sql/mod.rs"),
        ("**", "anything/at/all"),
        ("docs/*.md", "docs/leases.md"),
        ("docs/*.md", "docs/*"),
        ("docs/a*", "docs/*b"),
        ("src/*/mod.rs", "src/store/*"),
        ("a/**/z", "a/b/c/z"),
        ("a/**/z", "**/z"),
        ("TICKET-42", "TICKET-42"),
        ("*", "TICKET-42"),
    ];

    #[test]
    fn a_resource_breaking_a_rule_is_refused_naming_the_field() {
        let long = "a".repeat(513);
        let deep = vec!["a"; 33].join("/");
        for bad in [
            "",
            "/src",
            "src/",
            "a//b",
            "src/a**",
            "a\nb",
            long.as_str(),
            deep.as_str(),
        ] {
            let err = Pattern::parse("resource", bad).expect_err(bad);
            assert_eq!(err.details["field"], "resource", "{bad:?}");
        }
        assert!(Pattern::parse("resource", &"a".repeat(512)).is_ok());
    }
}
