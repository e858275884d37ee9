//! The shape of ids the server generates. (The rule for client-chosen ids lives with the
//! wire types: `switchboard_types::ids::TeamId::parse` and its siblings.)

use rand::Rng;

/// A new random id with a readable prefix, e.g. `team-3f9a1c2b7d4e5f60`.
pub fn random_id(prefix: &str) -> String {
    let n: u64 = rand::rng().random();
    format!("{prefix}-{n:016x}")
}

/// A new time-ordered id (UUIDv7) with a prefix, e.g. `msg_0193…`.
///
/// Time order keeps the B-tree of ids append-mostly, which is what makes inserts cheap.
pub fn ordered_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::now_v7().simple())
}
