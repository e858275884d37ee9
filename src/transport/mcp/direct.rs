//! A plain stateless `tools/call` (the 2026-07-28 revision) answered in the request's own
//! task, without the SDK's per-request service.
//!
//! For every stateless request the SDK builds a one-shot transport, a peer, a service
//! loop on a spawned task and its cancellation tokens, and hands the answer back over a
//! channel: per call, that machinery cost more than the tool itself (the benchmark found
//! the MCP tool at 40–47 % of REST's rate). A call of the common shape is recognised here
//! and answered with the same handler ([`super::tools::call`]) and the SDK's own model
//! types, serialized as the SDK serializes them; anything else — another method, a
//! session, a progress token, a retry with input responses, `Mcp-Param-*` headers, a header that does not match
//! the body, a waiting tool, a body the SDK's parser refuses — goes to the SDK untouched,
//! so every protocol rule and every error answer stays the SDK's.

use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientJsonRpcMessage, ClientRequest, GetMeta,
    ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
};

use super::tools::{self, Spec};
use crate::core::{Caller, Core};

/// The revision whose calls carry everything in each request.
const STATELESS: &str = "2026-07-28";

/// A recognised call: its id, the tool and the arguments.
pub(super) struct DirectCall {
    id: RequestId,
    spec: &'static Spec,
    params: CallToolRequestParams,
}

/// The call `body` is, when it is a plain stateless `tools/call` this module answers as
/// the SDK would; `None` hands the request to the SDK.
pub(super) fn recognise(parts: &Parts, body: &[u8]) -> Option<DirectCall> {
    let headers = &parts.headers;
    if parts.method != axum::http::Method::POST
        || headers.contains_key("mcp-session-id")
        || text(headers, "mcp-protocol-version") != Some(STATELESS)
        || text(headers, "mcp-method") != Some("tools/call")
        || !accepts_json_and_sse(headers)
        || !json_content(headers)
        || headers
            .keys()
            .any(|name| name.as_str().starts_with("mcp-param-"))
    {
        return None;
    }
    // The SDK's own parser, so what it would refuse is refused by it.
    let ClientJsonRpcMessage::Request(request) = serde_json::from_slice(body).ok()? else {
        return None;
    };
    // The SDK keeps a request's `_meta` with the request, not in its params.
    let meta = request.request.get_meta().clone();
    let ClientRequest::CallToolRequest(call) = request.request else {
        return None;
    };
    let params = call.params;
    let complete = meta
        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
        .is_empty();
    if !complete
        || meta
            .protocol_version()
            .as_ref()
            .map(ProtocolVersion::as_str)
            != Some(STATELESS)
        || meta.get_progress_token().is_some()
        || params.input_responses.is_some()
        || params.request_state.is_some()
        || text(headers, "mcp-name") != Some(params.name.as_ref())
    {
        return None;
    }
    let spec = tools::find(&params.name).filter(|spec| !spec.waits())?;
    Some(DirectCall {
        id: request.id,
        spec,
        params,
    })
}

/// Runs the call and answers it as one JSON-RPC response in a JSON body (what the SDK
/// answers with `json_response` for a call whose first message is its result).
pub(super) async fn answer(core: &Core, caller: &Caller, call: DirectCall) -> Response {
    let arguments = call.params.arguments.unwrap_or_default();
    let result = tools::call(core, caller, call.spec, arguments, |_| {}).await;
    let message =
        ServerJsonRpcMessage::response(ServerResult::from(CallToolResponse::from(result)), call.id);
    match serde_json::to_vec(&message) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "encoding an MCP answer failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

fn text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The SDK answers 406 unless a POST accepts both.
fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let essence = item.split(';').next().unwrap_or("").trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

fn json_content(headers: &HeaderMap) -> bool {
    text(headers, header::CONTENT_TYPE.as_str()).is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or("").trim();
        essence.eq_ignore_ascii_case("application/json")
    })
}

#[cfg(test)]
mod tests {
    use axum::http::Request;
    use serde_json::{Value, json};

    use super::recognise;

    fn parts(headers: &[(&str, &str)]) -> axum::http::request::Parts {
        let mut request = Request::post("/mcp");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).expect("request").into_parts().0
    }

    const PLAIN: &[(&str, &str)] = &[
        ("accept", "application/json, text/event-stream"),
        ("content-type", "application/json"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "whoami"),
    ];

    fn body(tool: &str, meta: Value) -> Vec<u8> {
        let mut full = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}});
        for (k, v) in meta.as_object().expect("object") {
            if v.is_null() {
                full.as_object_mut().expect("object").remove(k);
            } else {
                full[k] = v.clone();
            }
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": tool, "arguments": {}, "_meta": full}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn only_the_plain_shape_is_answered_directly() {
        assert!(recognise(&parts(PLAIN), &body("whoami", json!({}))).is_some());
        let with = |extra: (&'static str, &'static str)| {
            let mut headers = PLAIN.to_vec();
            headers.retain(|(name, _)| *name != extra.0);
            headers.push(extra);
            parts(&headers)
        };
        let plain = body("whoami", json!({}));
        let handed_on: Vec<(&str, axum::http::request::Parts, Vec<u8>)> = vec![
            ("a session", with(("mcp-session-id", "s1")), plain.clone()),
            (
                "an older revision",
                with(("mcp-protocol-version", "2025-06-18")),
                plain.clone(),
            ),
            (
                "another method",
                with(("mcp-method", "tools/list")),
                plain.clone(),
            ),
            (
                "a name unlike the body's",
                with(("mcp-name", "get_messages")),
                plain.clone(),
            ),
            (
                "an Mcp-Param header",
                with(("mcp-param-x", "1")),
                plain.clone(),
            ),
            (
                "no SSE accepted",
                with(("accept", "application/json")),
                plain.clone(),
            ),
            (
                "not JSON",
                with(("content-type", "text/plain")),
                plain.clone(),
            ),
            (
                "a progress token",
                parts(PLAIN),
                body("whoami", json!({"progressToken": 1})),
            ),
            (
                "a missing meta key",
                parts(PLAIN),
                body(
                    "whoami",
                    json!({"io.modelcontextprotocol/clientCapabilities": null}),
                ),
            ),
            (
                "a waiting tool",
                with(("mcp-name", "wait_for_messages")),
                body("wait_for_messages", json!({})),
            ),
            (
                "an unknown tool",
                with(("mcp-name", "nope")),
                body("nope", json!({})),
            ),
            (
                "a body that is no request",
                parts(PLAIN),
                b"{\"jsonrpc\":\"2.0\"}".to_vec(),
            ),
        ];
        for (why, parts, body) in handed_on {
            assert!(recognise(&parts, &body).is_none(), "{why}");
        }
    }
}
