//! Turning a [`CoreError`] into an HTTP response: the body is the wire's error body,
//! the status comes from its code. This table is the only place HTTP statuses are chosen
//! for errors.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use switchboard_types::{ErrorBody, ErrorCode};

use crate::core::CoreError;

/// A [`CoreError`] on its way out of a handler.
#[derive(Debug)]
pub struct ApiError(pub CoreError);

impl From<CoreError> for ApiError {
    fn from(err: CoreError) -> Self {
        ApiError(err)
    }
}

impl From<ErrorBody> for ApiError {
    fn from(body: ErrorBody) -> Self {
        ApiError(body.into())
    }
}

/// The HTTP status for each error code.
pub fn status_for(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::ValidationError | ErrorCode::MessageTooLong | ErrorCode::InvalidRecipient => {
            StatusCode::BAD_REQUEST
        }
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden | ErrorCode::CommunicationDisabled => StatusCode::FORBIDDEN,
        ErrorCode::NotFound
        | ErrorCode::AgentNotFound
        | ErrorCode::MessageNotFound
        | ErrorCode::TaskNotFound
        | ErrorCode::LeaseNotFound
        | ErrorCode::ApprovalNotFound => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::Conflict
        | ErrorCode::AgentAlreadyRegistered
        | ErrorCode::ResponseNotRequired
        | ErrorCode::ResponseDeadlinePassed
        | ErrorCode::InvalidTaskTransition
        | ErrorCode::NoSuitableAgent
        | ErrorCode::LoopDetected
        | ErrorCode::LeaseConflict
        | ErrorCode::ApprovalClosed => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::UriTooLong => StatusCode::URI_TOO_LONG,
        ErrorCode::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::InternalError => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = self.0.into_body();
        let status = status_for(body.error_code);
        // A refusal that says how long to wait says it in the standard header too.
        let retry_after = body
            .details
            .get("retry_after_ms")
            .and_then(serde_json::Value::as_u64)
            .map(|ms| ms.div_ceil(1000).max(1));
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110: a 401 names the scheme that would be accepted.
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"switchboard\""),
            );
        }
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

/// The result type of every handler.
pub type ApiResult<T> = Result<T, ApiError>;
