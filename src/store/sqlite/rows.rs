//! Row encoding shared by the SQLite modules: JSON rows for the shared insert and the
//! content as stored (rows are read by `store::columns`, for both engines).

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
