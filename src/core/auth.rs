//! Credentials: how tokens look, how they are checked, and who a caller is.
//!
//! A token is `sb_<kind>_<id>_<secret>`: `kind` says what it is (`admin`, `team`,
//! `agent`), `id` (16 hex digits) finds the stored credential without comparing secrets,
//! and `secret` (64 hex digits, 256 random bits) is checked by comparing its SHA-256 digest
//! in constant time. Only digests are stored. A fast hash is right here: the secret is
//! random, not a password, so there is nothing to brute-force.

use rand::Rng;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchboard_types::ids::{AgentPk, TeamPk};
pub use switchboard_types::routing::Via;
pub use switchboard_types::teams::TokenKind;

use super::error::CoreError;
pub use crate::model::SecretHash;

/// Who is making a call, as decided by the token alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// The server admin: creates teams, and may manage any team.
    Admin,
    /// A team key: manages its own team's agents and settings.
    Team { team: TeamPk },
    /// An agent token: acts as that agent inside its team, by `via` (what it sends
    /// remembers the transport, so that a reply can go back the same way).
    Agent {
        team: TeamPk,
        agent: AgentPk,
        via: Via,
    },
}

impl Caller {
    /// The same caller, calling by `via` (a transport says so once it authenticated).
    pub fn by(self, via: Via) -> Caller {
        match self {
            Caller::Agent { team, agent, .. } => Caller::Agent { team, agent, via },
            other => other,
        }
    }

    /// The transport an agent calls by (`None` for other callers).
    pub fn via(&self) -> Option<Via> {
        match self {
            Caller::Agent { via, .. } => Some(*via),
            _ => None,
        }
    }
}

/// A token's prefix says what it stands for.
fn prefix(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::Admin => "sb_admin_",
        TokenKind::Team => "sb_team_",
        TokenKind::Agent => "sb_agent_",
    }
}

/// A freshly minted token: the text is shown to the client once, the rest is stored.
pub struct NewToken {
    pub text: String,
    pub id: String,
    pub hash: SecretHash,
}

/// Mints a token of the given kind.
pub fn mint(kind: TokenKind) -> NewToken {
    let mut rng = rand::rng();
    let id = hex::encode(rng.random::<[u8; 8]>());
    let secret = hex::encode(rng.random::<[u8; 32]>());
    NewToken {
        text: format!("{}{id}_{secret}", prefix(kind)),
        hash: digest(&secret),
        id,
    }
}

/// A token split into its parts, not yet checked against anything.
#[derive(Debug, PartialEq, Eq)]
pub struct ParsedToken<'a> {
    pub kind: TokenKind,
    pub id: &'a str,
    pub secret: &'a str,
}

/// Splits a presented token; `None` when it cannot be one of ours.
pub fn parse(token: &str) -> Option<ParsedToken<'_>> {
    for kind in [TokenKind::Admin, TokenKind::Team, TokenKind::Agent] {
        if let Some(rest) = token.strip_prefix(prefix(kind)) {
            let (id, secret) = rest.split_once('_')?;
            return Some(ParsedToken { kind, id, secret });
        }
    }
    None
}

pub fn digest(secret: &str) -> SecretHash {
    Sha256::digest(secret.as_bytes()).into()
}

/// What a start settled about the admin token, for the operator: a server that says
/// nothing leaves someone whose first start failed without a token and without a clue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdminToken {
    /// The operator gave one (`--admin-token`), the one already in force.
    Configured,
    /// The operator gave one that differs from the one stored, which it now replaces:
    /// the old one is refused from this start on. Said aloud, since a variable left set
    /// in a shell or a unit file would otherwise lock an operator out without a word.
    Replaced {
        /// When the replaced one had been set, if that was recorded.
        was_set_at: Option<switchboard_types::time::Timestamp>,
    },
    /// None was given or stored: this one was generated, to be shown once.
    Generated(String),
    /// Kept from an earlier start; when it was set, if that was recorded.
    Stored {
        set_at: Option<switchboard_types::time::Timestamp>,
    },
}

/// Settles the admin token of a database: the operator's `configured` one (recorded with
/// today's date when it differs from the stored one), else the stored one, else a new
/// one.
pub async fn settle_admin_token(
    store: &crate::store::Store,
    configured: Option<&str>,
) -> Result<(SecretHash, AdminToken), crate::store::StoreError> {
    let stored = store.admin_token().await?;
    if let Some(token) = configured {
        let hash = digest(token);
        let settled = match &stored {
            Some(s) if s.hash == hash => return Ok((hash, AdminToken::Configured)),
            Some(s) => AdminToken::Replaced {
                was_set_at: s.set_at,
            },
            None => AdminToken::Configured,
        };
        store
            .set_admin_hash(hash, switchboard_types::time::Timestamp::now())
            .await?;
        return Ok((hash, settled));
    }
    if let Some(stored) = stored {
        let set_at = stored.set_at;
        return Ok((stored.hash, AdminToken::Stored { set_at }));
    }
    let (hash, token) = replace_admin_token(store, None).await?;
    Ok((hash, AdminToken::Generated(token)))
}

/// Sets a new admin token (`token`, or a generated one) and returns it with its digest:
/// `switchboard admin reset-token`, run while no server serves the database.
pub async fn replace_admin_token(
    store: &crate::store::Store,
    token: Option<&str>,
) -> Result<(SecretHash, String), crate::store::StoreError> {
    let token = match token {
        Some(token) => token.to_owned(),
        None => mint(TokenKind::Admin).text,
    };
    let hash = digest(&token);
    store
        .set_admin_hash(hash, switchboard_types::time::Timestamp::now())
        .await?;
    Ok((hash, token))
}

/// Checks a presented secret against a stored digest in constant time.
pub fn verify(secret: &str, stored: &SecretHash) -> bool {
    digest(secret).ct_eq(stored).into()
}

/// The error for every token the server does not accept. One message for all cases, so
/// the answer does not tell an attacker which part was wrong.
pub fn invalid_token() -> CoreError {
    CoreError::unauthorized("the bearer token is missing, malformed, revoked or unknown")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_parse_and_verify() {
        for kind in [TokenKind::Admin, TokenKind::Team, TokenKind::Agent] {
            let token = mint(kind);
            let parsed = parse(&token.text).expect("parses");
            assert_eq!(parsed.kind, kind);
            assert_eq!(parsed.id, token.id);
            assert!(verify(parsed.secret, &token.hash));
            assert!(!verify("not-the-secret", &token.hash));
        }
    }

    #[test]
    fn foreign_strings_do_not_parse() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("sb_agent_nounderscore"), None);
    }
}
