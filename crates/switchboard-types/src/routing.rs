//! Routing when one agent is connected several ways (AEA's precedence, adapted): the
//! transport a message came by and the one it may be pushed by.

use serde::{Deserialize, Serialize};

use crate::messages::wire_enum;

wire_enum! {
    "lowercase";
    /// A live transport an inbox entry is pushed by (AEA's routing, adapted): with a
    /// route, only the recipient's connections of that transport get it pushed or
    /// replayed; it stays in the inbox (GET_MESSAGES) either way.
    pub enum Route {
        /// WebSocket connections (`/v1/ws`).
        Websocket,
        /// STOMP subscriptions (TCP and `/v1/stomp`).
        Stomp,
    }
}

wire_enum! {
    "lowercase";
    /// The transport a message arrived by: a reply to it goes back the same way when
    /// that is a live transport (see [`Route`]).
    pub enum Via { Rest, Websocket, Stomp, Mcp }
}

impl Via {
    /// The live route back to the sender, if this transport is one.
    pub fn route(self) -> Option<Route> {
        match self {
            Via::Rest | Via::Mcp => None,
            Via::Websocket => Some(Route::Websocket),
            Via::Stomp => Some(Route::Stomp),
        }
    }
}
