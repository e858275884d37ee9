//! `GET /v1/search`: full-text search over what the caller may read (`docs/search.md`).

use axum::Json;
use axum::extract::State;
use switchboard_types::search::{SearchPage, SearchQuery};
use switchboard_types::{ErrorBody, MessageOp, Operation, Reply};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{HttpState, ok};
use crate::transport::common::{ApiResult, Auth, QueryParams};

pub fn router() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new().routes(routes!(search_messages))
}

/// Find messages by the words in them: their text and the strings of their data. An agent
/// finds what it sent and what was addressed to it; the team key every message of its
/// team. `q` takes words (all must match), `"a phrase"` and `prefix*`; the filters are the
/// inbox's. Best match first (`sort=relevance`, each engine's own ranking) or newest first.
#[utoipa::path(get, path = "/v1/search", tag = "messages", security(("bearer" = [])),
    params(SearchQuery),
    responses(
        (status = 200, description = "One page of results", body = SearchPage),
        (status = 400, description = "VALIDATION_ERROR: q (no word, too long, too many terms, a one-letter prefix), limit, cursor, a filter", body = ErrorBody),
        (status = 401, description = "UNAUTHORIZED", body = ErrorBody),
        (status = 403, description = "FORBIDDEN: the admin token (it belongs to no team)", body = ErrorBody),
        (status = 404, description = "AGENT_NOT_FOUND: sender or recipient is not a member", body = ErrorBody),
    ))]
async fn search_messages(
    State(state): State<HttpState>,
    Auth(caller): Auth,
    QueryParams(query): QueryParams<SearchQuery>,
) -> ApiResult<Json<Reply>> {
    ok(
        state,
        &caller,
        Operation::Messages(MessageOp::SearchMessages(query)),
    )
    .await
}
