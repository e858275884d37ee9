//! One corpus on both engines at once (the differential test's style): every query of a
//! list, newest first, finds the same messages on SQLite and on PostgreSQL; by relevance
//! the same set (the rankings are each engine's own: `docs/search.md`).

use crate::support::TestApp;

use super::{corpus, found, urlencoding};

const QUERIES: &[&str] = &[
    "parser",
    "\"parser change\"",
    "\"change parser\"",
    "revi*",
    "par* re*",
    "urgent",
    "parser-42",
    "zoë",
    "soup bread",
    "friday",
    "the",
    "nothing-here",
];

#[tokio::test]
async fn both_engines_find_the_same_messages_for_the_same_queries() {
    let Some(pg) = TestApp::start_on_postgres().await else {
        return;
    };
    let sqlite = TestApp::start_on_sqlite_with(|_| {}).await;
    let (lite_team, ..) = corpus(&sqlite).await;
    let (pg_team, ..) = corpus(&pg).await;
    for q in QUERIES {
        let newest = format!("q={}&sort=newest", urlencoding(q));
        let on_sqlite = found(&sqlite, &lite_team.key, &newest).await;
        let on_pg = found(&pg, &pg_team.key, &newest).await;
        assert_eq!(on_sqlite, on_pg, "{q}");
        let ranked = format!("q={}", urlencoding(q));
        let mut on_sqlite = found(&sqlite, &lite_team.key, &ranked).await;
        let mut on_pg = found(&pg, &pg_team.key, &ranked).await;
        on_sqlite.sort();
        on_pg.sort();
        assert_eq!(on_sqlite, on_pg, "{q}, by relevance");
    }
    sqlite.stop().await;
    pg.stop().await;
}
