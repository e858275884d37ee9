//! A core refusal in A2A's terms: the JSON-RPC code a client branches on, the contract's
//! code and details in an `ErrorInfo`, so nothing the REST body says is lost.

use std::collections::HashMap;

use a2a::{A2AError, TypedDetail, error_code};
use switchboard_types::ErrorCode;

use crate::core::CoreError;

/// The JSON-RPC code of a refusal the caller may retry later (a bound of its credential,
/// a busy server).
pub const SERVER_BUSY: i32 = -32000;

/// A refusal of the core in A2A's codes; the contract's code and details travel in the
/// `ErrorInfo` metadata (`error_code`, …), so nothing the REST body says is lost.
pub fn to_a2a(err: CoreError) -> A2AError {
    let body = err.into_body();
    let code = match body.error_code {
        ErrorCode::TaskNotFound => error_code::TASK_NOT_FOUND,
        ErrorCode::InvalidTaskTransition | ErrorCode::LoopDetected => {
            error_code::UNSUPPORTED_OPERATION
        }
        ErrorCode::ValidationError
        | ErrorCode::MessageTooLong
        | ErrorCode::AgentNotFound
        | ErrorCode::InvalidRecipient => error_code::INVALID_PARAMS,
        // A2A names no code for "not now": JSON-RPC's server-error range, with the
        // contract's code and `retry_after_ms` in the details, so a client tells a bound
        // it may retry from a failure.
        ErrorCode::RateLimited | ErrorCode::Unavailable => SERVER_BUSY,
        _ => error_code::INTERNAL_ERROR,
    };
    let mut metadata: HashMap<String, String> = body
        .details
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str().map_or_else(|| v.to_string(), str::to_owned),
            )
        })
        .collect();
    metadata.insert("error_code".into(), body.error_code.as_str().to_owned());
    // A code of the server-error range reaches a stock client as a bare message (the
    // Python SDK drops the details of a code it does not know): the message names the
    // contract's code itself.
    let message = if code == SERVER_BUSY {
        format!("{}: {}", body.error_code.as_str(), body.error_message)
    } else {
        body.error_message
    };
    A2AError::new(code, message).with_details(vec![TypedDetail::error_info(
        body.error_code.as_str(),
        "switchboard",
        Some(metadata),
    )])
}
