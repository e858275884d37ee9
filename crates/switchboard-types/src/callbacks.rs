//! What became of a task's callbacks, and the key they are signed with (`docs/tasks.md`,
//! "Callbacks"); re-exported by [`crate::tasks`], where the protocol's types live.

use serde::{Deserialize, Serialize};

use crate::ids::TeamId;
use crate::messages::wire_enum;
use crate::time::Timestamp;

wire_enum! {
    "lowercase";
    /// What became of a callback POST.
    pub enum DeliveryState {
        /// Not delivered yet; will be tried again.
        Pending,
        /// The receiver answered 2xx.
        Delivered,
        /// Every attempt failed; given up.
        Failed,
    }
}

/// One CallbackNotification POSTed (or being POSTed) to the task's callback URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackDelivery {
    /// Also sent as the `Switchboard-Delivery` header.
    pub delivery_id: i64,
    /// The task event it reports.
    pub event_seq: i64,
    pub state: DeliveryState,
    pub attempts: i64,
    /// The receiver's last HTTP status, if it answered.
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    /// When it was delivered or given up.
    pub finished_at: Option<Timestamp>,
}

/// Answer of the team's callback secret endpoints.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackSecret {
    pub success: bool,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub team_id: TeamId,
    /// The HMAC-SHA256 key of the `Switchboard-Signature` header.
    pub secret: String,
    pub rotated_at: Timestamp,
}
