//! Search, one implementation for both engines: the SQL is built by
//! `store::search::search_query` in the engine's own words.

use crate::model::{Bounded, SearchSpec, TrafficRow};
use crate::store::StoreError;
use crate::store::columns::{traffic_row, traffic_weight};
use crate::store::engine::Search;
use crate::store::paging::bounded;
use crate::store::search::search_query;

for_each_engine! {
    impl Search for Store {
        async fn search_messages(&self, spec: SearchSpec) -> Result<Bounded<TrafficRow>, StoreError> {
            let mut query = search_query::<Db>(&spec);
            let rows = query.build().fetch(&self.read);
            bounded(rows, traffic_weight, traffic_row).await
        }
    }
}
