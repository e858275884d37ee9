//! Extractors whose rejections are our error body.
//!
//! axum's own `Json` and `Query` reject with plain text; a client of Switchboard must get
//! the contract's error body for every failure, with the offending field named, so these
//! replace them.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use switchboard_types::decode::{decode_json, field_error};
use switchboard_types::{ErrorBody, ErrorCode};

use super::HasCore;
use super::auth::authenticate;
use super::error::ApiError;
use crate::core::Caller;

/// The caller, decided by the `Authorization: Bearer` token.
pub struct Auth(pub Caller);

impl<S: HasCore> FromRequestParts<S> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or(""));
        Ok(Auth(authenticate(state.core(), header).await?))
    }
}

/// The optional `Idempotency-Key` header: a retry with the same key returns the first
/// answer instead of acting twice.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        match parts.headers.get("idempotency-key") {
            None => Ok(IdempotencyKey(None)),
            Some(value) => value
                .to_str()
                .map(|v| IdempotencyKey(Some(v.to_owned())))
                .map_err(|_| {
                    ApiError::from(ErrorBody::validation(
                        "Idempotency-Key",
                        "the key must be visible ASCII",
                    ))
                }),
        }
    }
}

/// A JSON body, decoded whatever the `Content-Type` (so `curl -d` works), with errors
/// that name the field: malformed JSON, a wrong type, a missing or unknown field.
pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = read_body(req, state).await?;
        decode_json(&bytes).map(JsonBody).map_err(ApiError::from)
    }
}

/// A request's whole body, or the error body that says why not: over the size limit
/// (413), past the body deadline (408), or unreadable (400).
pub async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    let limit = req.extensions().get::<BodyLimit>().map(|l| l.0);
    let deadline = req.extensions().get::<BodyDeadline>().map(|d| d.0);
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large(limit).into()
        } else if timed_out(&rejection) {
            let err = ErrorBody::new(
                ErrorCode::RequestTimeout,
                "the request body did not arrive in time",
            );
            match deadline {
                Some(deadline) => err.with("limit_seconds", deadline.as_secs()).into(),
                None => err.into(),
            }
        } else {
            ErrorBody::validation("body", format!("could not read the body: {rejection}")).into()
        }
    })
}

/// Whether reading a body failed because its deadline passed.
fn timed_out(rejection: &axum::extract::rejection::BytesRejection) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(err) = source {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        source = err.source();
    }
    false
}

/// The configured body deadline, made visible to the extractor so the 408 can say it.
#[derive(Clone, Copy)]
pub struct BodyDeadline(pub std::time::Duration);

/// The configured body limit, made visible to the extractor so the 413 can say it.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

pub fn too_large(limit: Option<usize>) -> ErrorBody {
    let err = ErrorBody::new(ErrorCode::PayloadTooLarge, "the request body is too large");
    match limit {
        Some(limit) => err.with("limit_bytes", limit),
        None => err,
    }
}

/// Path parameters, with our error body when they cannot be decoded.
pub struct PathParams<T>(pub T);

impl<S, T> FromRequestParts<S> for PathParams<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // The rule of every way in (`switchboard_types::strict`): no NUL in a string.
        if parts.uri.path().to_ascii_lowercase().contains("%00") {
            return Err(
                ErrorBody::validation("path", "a path may not contain U+0000 (NUL)").into(),
            );
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathParams(p.0))
            .map_err(|rejection| {
                ApiError::from(ErrorBody::validation("path", rejection.body_text()))
            })
    }
}

/// Query parameters decoded into `T`, with errors naming the parameter.
pub struct QueryParams<T>(pub T);

impl<S, T> FromRequestParts<S> for QueryParams<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        decode_query(parts.uri.query().unwrap_or(""))
            .map(QueryParams)
            .map_err(ApiError::from)
    }
}

/// Decodes a query string into `T`, naming the parameter on failure.
pub fn decode_query<T: DeserializeOwned>(query: &str) -> Result<T, ErrorBody> {
    // The rule of every way in (`switchboard_types::strict`): no NUL in a string.
    if let Some((name, _)) =
        form_urlencoded_parse(query).find(|(k, v)| k.contains('\0') || v.contains('\0'))
    {
        let name = switchboard_types::decode::visible_field(&name);
        return Err(ErrorBody::validation(
            &name,
            format!("{name}: a string may not contain U+0000 (NUL)"),
        ));
    }
    let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        field_error(&path, &err.into_inner().to_string())
    })
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}
