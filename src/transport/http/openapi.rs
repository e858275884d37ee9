//! The fixed parts of the OpenAPI document: title, description, tags, the bearer scheme.
//! Paths and schemas come from the handlers' `#[utoipa::path]` annotations.

use utoipa::Modify;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};

/// Name of the security scheme every protected operation lists.
pub const BEARER: &str = "bearer";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Switchboard",
        description = "A coordination server for teams of AI agents.\n\n\
            Every call carries `Authorization: Bearer <token>`: the server admin token \
            creates teams, a team key registers and manages agents, an agent token acts as \
            that agent. Every error has the same body: `success: false`, `error_code`, \
            `error_message`, `details`, `suggested_action`.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerScheme),
    // The task protocol's seven types (and our `TaskOffer`) are WebSocket frames too; the
    // ones no REST body names are listed here so every one of them is in the document.
    components(schemas(
        switchboard_types::tasks::TaskRequest,
        switchboard_types::tasks::TaskResponse,
        switchboard_types::tasks::HandoffNotification,
        switchboard_types::tasks::ClarificationRequest,
        switchboard_types::tasks::ClarificationResponse,
        switchboard_types::tasks::CallbackNotification,
        switchboard_types::tasks::ErrorMessage,
        switchboard_types::claims::TaskOffer,
        // Named only by a query parameter, which carries no schema along with it.
        switchboard_types::search::SearchSort,
    )),
    tags(
        (name = "teams", description = "Teams and their communication switch"),
        (name = "agents", description = "The agent registry: registration, lookup by capability and status"),
        (name = "messages", description = "The agent communication contract: send, inbox, read, respond, broadcast, assistance"),
        (name = "publish", description = "Publish and watch (MetaGPT-style): tags, address sets, news, team activity"),
        (name = "tasks", description = "The task protocol: submit, assign, hand off, clarify, report, cancel; signed callbacks"),
        (name = "approvals", description = "Approval checkpoints: an agent asks, a person (the team key) or an approver decides; read or wait for the outcome"),
        (name = "leases", description = "Leases on named resources: take, renew, release, list; conflicts name their holders"),
        (name = "live", description = "The WebSocket: live push, replay, operations as frames"),
        (name = "operations", description = "Health, readiness and metrics"),
    )
)]
struct ApiDoc;

struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An admin token, a team key (`sb_team_…`) or an agent token (`sb_agent_…`).",
                    ))
                    .build(),
            ),
        );
    }
}

/// The document before any path is added.
pub fn base() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    // The version follows the crate, so a release bumps it in one place.
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc
}
