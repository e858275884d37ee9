//! Inserting a team on PostgreSQL (the rest: `store/sql/teams.rs`).

use rand::RngCore;
use sqlx::postgres::PgConnection;
use switchboard_types::ids::TeamPk;

use crate::model::TeamRecord;
use crate::store::StoreError;

pub(crate) use crate::store::sql::teams::postgres::*;

/// Inserts a team with its callback secret (made here: PostgreSQL has no cryptographic
/// random bytes without an extension; SQLite's trigger makes the same `whsec_` + 64 hex
/// digits). [`StoreError::Conflict`] when the id is taken.
pub(crate) async fn insert(conn: &mut PgConnection, t: &TeamRecord) -> Result<TeamPk, StoreError> {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("whsec_{}", hex::encode(bytes));
    let pk: i64 = sqlx::query_scalar(
        "WITH t AS (
             INSERT INTO teams (team_id, name, key_id, key_hash, communication_enabled,
                                created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING pk, created_at),
         s AS (INSERT INTO team_secrets (team_pk, secret, rotated_at)
               SELECT pk, $8, created_at FROM t)
         SELECT pk FROM t",
    )
    .bind(&*t.team_id)
    .bind(&t.name)
    .bind(&t.key_id)
    .bind(t.key_hash.as_slice())
    .bind(t.communication_enabled)
    .bind(t.created_at.micros())
    .bind(t.updated_at.micros())
    .bind(secret)
    .fetch_one(conn)
    .await?;
    Ok(TeamPk(pk))
}
