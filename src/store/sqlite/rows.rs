//! Row encoding shared by the SQLite modules: JSON rows and bound `VALUES` lists for the
//! shared inserts, and the content as stored (rows are read by `store::columns`, for
//! both engines).

use crate::store::StoreError;
pub(super) use crate::store::columns::StoredContent;

/// A JSON array of rows, built by appending serialised rows.
#[derive(Default)]
pub(super) struct JsonRows(Vec<u8>);

impl JsonRows {
    pub(super) fn push<T: serde::Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        self.0.push(if self.0.is_empty() { b'[' } else { b',' });
        serde_json::to_writer(&mut self.0, row)
            .map_err(|e| StoreError::Corrupt(format!("JSON row: {e}")))
    }

    /// The array, or `None` when no row was pushed (its insert can be skipped).
    pub(super) fn finish_some(self) -> Result<Option<String>, StoreError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        self.finish().map(Some)
    }

    pub(super) fn finish(mut self) -> Result<String, StoreError> {
        if self.0.is_empty() {
            self.0.push(b'[');
        }
        self.0.push(b']');
        // serde_json writes UTF-8 only.
        String::from_utf8(self.0).map_err(|e| StoreError::Corrupt(format!("JSON rows: {e}")))
    }
}

pub(super) use crate::store::columns::to_json;

pub(super) type Query<'q> = sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments>;

/// `size` rows of `arity` parameters, `(?, …),\n(?, …)`: a `VALUES` list bound row by
/// row. Staged tasks and messages are written this way, with one statement per
/// power-of-two `size` ([`size_index`]); the rows past the real ones are bound NULL
/// ([`nulls`]) and skipped by a `WHERE columnN IS NOT NULL`.
pub(super) fn values_list(arity: usize, size: usize) -> String {
    let row = format!("({})", vec!["?"; arity].join(", "));
    vec![row; size].join(",\n           ")
}

/// Where in `sizes` (ascending) the smallest that holds `n` rows is; `None` when none does.
pub(super) fn size_index(sizes: &[usize], n: usize) -> Option<usize> {
    sizes.iter().position(|s| *s >= n)
}

/// `n` NULLs: a padding row's values, or the part of one a row leaves empty.
pub(super) fn nulls<'a>(n: usize) -> impl Iterator<Item = Col<'a>> {
    std::iter::repeat_n(Col::Null, n)
}

/// One value of a row, bound by either driver: the row's column order is written once.
#[derive(Clone)]
pub(super) enum Col<'a> {
    Int(i64),
    Text(&'a str),
    /// Text rendered for the row (a JSON column).
    Owned(String),
    Null,
}

impl<'a> Col<'a> {
    pub(super) fn int(value: Option<i64>) -> Col<'a> {
        value.map_or(Col::Null, Col::Int)
    }

    pub(super) fn text(value: Option<&'a str>) -> Col<'a> {
        value.map_or(Col::Null, Col::Text)
    }

    pub(super) fn bind(self, q: Query<'a>) -> Query<'a> {
        match self {
            Col::Int(i) => q.bind(i),
            Col::Text(s) => q.bind(s),
            Col::Owned(s) => q.bind(s),
            Col::Null => q.bind(None::<i64>),
        }
    }
}

impl rusqlite::ToSql for Col<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Col::Int(i) => ValueRef::Integer(*i),
            Col::Text(s) => ValueRef::Text(s.as_bytes()),
            Col::Owned(s) => ValueRef::Text(s.as_bytes()),
            Col::Null => ValueRef::Null,
        }))
    }
}
