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

use super::AppState;
use super::error::ApiError;
use crate::core::{Caller, CoreError, ErrorCode, auth};

/// The caller, decided by the `Authorization: Bearer` token.
pub struct Auth(pub Caller);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or(""));
        let token = auth::bearer(header)?;
        Ok(Auth(state.core.authenticate(token)?))
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
                    ApiError(CoreError::validation(
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
        let limit = req.extensions().get::<BodyLimit>().map(|l| l.0);
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit)
            } else {
                CoreError::validation("body", format!("could not read the body: {rejection}"))
            }
        })?;
        decode_json(&bytes).map(JsonBody).map_err(ApiError)
    }
}

/// The configured body limit, made visible to the extractor so the 413 can say it.
#[derive(Clone, Copy)]
pub struct BodyLimit(pub usize);

pub fn too_large(limit: Option<usize>) -> CoreError {
    let err = CoreError::new(ErrorCode::PayloadTooLarge, "the request body is too large");
    match limit {
        Some(limit) => err.with("limit_bytes", limit),
        None => err,
    }
}

/// Decodes an already parsed JSON value into `T`, naming the field on failure (the
/// WebSocket transport decodes frames this way, with the same errors as REST bodies).
pub fn decode_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, CoreError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        field_error(&path, &err.into_inner().to_string())
    })
}

/// Decodes JSON text into `T`, naming the field on failure (`content.text`,
/// `recipient_agent_ids[2]`, …).
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CoreError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CoreError::validation(
            "body",
            "the request needs a JSON body",
        ));
    }
    // Tracking the path costs on every field; a good body (the usual case) does not
    // need it, so the path is worked out only by a second pass over a bad one.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            CoreError::validation("body", format!("the body is not valid JSON: {inner}"))
        } else {
            field_error(&path, &inner.to_string())
        }
    })?;
    de.end().map_err(|e| {
        CoreError::validation("body", format!("unexpected data after the JSON value: {e}"))
    })?;
    Ok(value)
}

/// Builds a `VALIDATION_ERROR` for a serde message at `path`. serde reports a missing
/// field on the containing object, so its name is taken from the message to point at
/// the field itself.
pub fn field_error(path: &str, message: &str) -> CoreError {
    let message = message.split(" at line ").next().unwrap_or(message);
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    let field = match (path, missing) {
        (".", Some(name)) => name.to_owned(),
        (p, Some(name)) => format!("{p}.{name}"),
        (".", None) => "body".to_owned(),
        (p, None) => p.to_owned(),
    };
    CoreError::validation(&field, format!("{field}: {message}"))
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
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathParams(p.0))
            .map_err(|rejection| ApiError(CoreError::validation("path", rejection.body_text())))
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
            .map_err(ApiError)
    }
}

pub fn decode_query<T: DeserializeOwned>(query: &str) -> Result<T, CoreError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        field_error(&path, &err.into_inner().to_string())
    })
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        name: String,
        inner: Inner,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn field_of(json: &str) -> String {
        let err = decode_json::<Outer>(json.as_bytes()).expect_err(json);
        assert_eq!(err.error_code, ErrorCode::ValidationError);
        err.details["field"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn names_the_offending_field() {
        assert_eq!(field_of(r#"{"inner": {"count": 1}}"#), "name");
        assert_eq!(field_of(r#"{"name": 5, "inner": {"count": 1}}"#), "name");
        assert_eq!(
            field_of(r#"{"name": "x", "inner": {"count": "many"}}"#),
            "inner.count"
        );
        assert_eq!(field_of(r#"{"name": "x", "inner": {}}"#), "inner.count");
        assert_eq!(
            field_of(r#"{"name": "x", "inner": {"count": 1}, "extra": 1}"#),
            "extra"
        );
        assert_eq!(field_of(r#"{"name": "#), "body");
        assert_eq!(field_of(""), "body");
    }
}
