//! Row encoding shared by the SQLite modules: JSON rows for the shared insert and the
//! content as stored (rows are read by `store::columns`, for both engines).

use crate::store::StoreError;
pub(super) use crate::store::columns::StoredContent;

/// Columns 1–17 of a row of `messages` as [`FLUSH_POSTS`] reads it (a tuple struct
/// serialises as a JSON array; plain tuples stop at 12 fields).
#[derive(serde::Serialize)]
pub(super) struct MessageColumns<'a>(
    pub(super) &'a str,
    pub(super) i64,
    pub(super) &'a str,
    pub(super) i64,
    pub(super) &'a str,
    pub(super) &'a str,
    pub(super) &'a str,
    pub(super) String,
    pub(super) i64,
    pub(super) Option<i64>,
    pub(super) &'a Option<String>,
    pub(super) &'a Option<String>,
    pub(super) &'a Option<String>,
    pub(super) Option<&'a str>,
    pub(super) String,
    pub(super) Option<&'a str>,
    pub(super) Option<&'a str>,
);

/// A JSON array of rows, built by appending serialised rows.
#[derive(Default)]
pub(super) struct JsonRows(Vec<u8>);

impl JsonRows {
    pub(super) fn push<T: serde::Serialize>(&mut self, row: &T) -> Result<(), StoreError> {
        self.0.push(if self.0.is_empty() { b'[' } else { b',' });
        serde_json::to_writer(&mut self.0, row)
            .map_err(|e| StoreError::Corrupt(format!("JSON row: {e}")))
    }

    /// Starts a row written piecewise with [`JsonRows::raw`]; the caller closes it.
    pub(super) fn open_row(&mut self) {
        self.0
            .extend_from_slice(if self.0.is_empty() { b"[[" } else { b",[" });
    }

    /// Appends JSON text that is already valid in place.
    pub(super) fn raw(&mut self, json: &str) {
        self.0.extend_from_slice(json.as_bytes());
    }

    pub(super) fn finish(mut self) -> Result<String, StoreError> {
        if self.0.is_empty() {
            self.0.push(b'[');
        }
        self.0.push(b']');
        // serde_json and the raw fragments (all `&str`) write UTF-8 only.
        String::from_utf8(self.0).map_err(|e| StoreError::Corrupt(format!("JSON rows: {e}")))
    }
}

pub(super) use crate::store::columns::to_json;
