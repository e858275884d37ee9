//! MCP against REST on one server: SEND_MESSAGE as a `send_message` tool call (the
//! stateless 2026-07-28 form: one POST per call, no session) and as `POST /v1/messages`,
//! in alternating slices with the same connections; then how soon `wait_for_messages`
//! is released after a REST send is acknowledged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, StatusCode};

use crate::Opts;
use crate::harness::{
    AgentCreds, MakeRequest, Row, ServerProcess, Setup, Side, interleaved, quantile_ms,
};
use crate::live::row;
use crate::scenarios::post;

const SLICES: u32 = 4;
const WAITS: usize = 200;

/// The JSON-RPC body of a `tools/call` of the stateless revision.
fn call_body(tool: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{{"name":"bench","version":"1"}},"io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
}

/// A `tools/call` of the stateless revision, as one request.
fn tool_call(host: &str, token: &str, tool: &str, arguments: &str) -> Request<Full<Bytes>> {
    Request::post("/mcp")
        .header("host", host)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(call_body(tool, arguments))))
        .expect("request")
}

pub async fn mcp(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let setup = Setup::new(&server);
    let (_, agents) = setup.team("bench", "a", opts.connections + 1, &[]).await;
    let host = server.addr.to_string();
    let senders: Arc<Vec<AgentCreds>> = Arc::new(agents[1..].to_vec());
    let sink = agents[0].id.clone();
    let (rest_host, rest_senders, rest_sink) = (host.clone(), senders.clone(), sink.clone());
    let make_rest: MakeRequest = Arc::new(move |conn: usize, i: u64| {
        let a = &rest_senders[conn % rest_senders.len()];
        let body = format!(
            r#"{{"sender_agent_id":"{}","recipient_agent_ids":["{rest_sink}"],"message_type":"information","content":{{"text":"message {i}"}}}}"#,
            a.id
        );
        post(&rest_host, "/v1/messages", &a.token, body)
    });
    let make_mcp: MakeRequest = Arc::new(move |conn: usize, i: u64| {
        let a = &senders[conn % senders.len()];
        let arguments = format!(
            r#"{{"recipient_agent_ids":["{sink}"],"message_type":"information","content":{{"text":"message {i}"}}}}"#
        );
        tool_call(&host, &a.token, "send_message", &arguments)
    });
    check_tool_call(&server, &agents[1]).await;
    let sides = [
        Side {
            addr: server.addr,
            expect: StatusCode::CREATED,
            make: make_rest,
        },
        Side {
            addr: server.addr,
            expect: StatusCode::OK,
            make: make_mcp,
        },
    ];
    let [rest, over_mcp] = interleaved(&opts, SLICES, &sides).await;
    let ratio = 100.0 * over_mcp.per_second() / rest.per_second();
    let rss = server.rss_kib();
    let mut rows = vec![
        Row::from_load(
            "mcp",
            format!("REST send_message, {} conns", opts.connections),
            rest,
            rss,
            "alternating slices with the MCP row, same server".into(),
        ),
        Row::from_load(
            "mcp",
            format!("MCP send_message tool, {} conns", opts.connections),
            over_mcp,
            rss,
            format!("{ratio:.0}% of REST (target ≥ 50%)"),
        ),
    ];
    rows.push(wait_release(&server, &agents).await);
    rows
}

/// One call answered without a tool error, so the load measures real sends.
async fn check_tool_call(server: &ServerProcess, agent: &AgentCreds) {
    let text = mcp_post(server.base(), agent.token.clone(), "whoami", "{}".into()).await;
    assert!(
        text.contains(r#""isError":false"#),
        "a tool call failed: {text}"
    );
}

/// One tool call through a client library (not the load generator): its answer's text.
async fn mcp_post(base: String, token: String, tool: &'static str, arguments: String) -> String {
    reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(call_body(tool, &arguments))
        .send()
        .await
        .expect("MCP answers")
        .text()
        .await
        .expect("body")
}

/// `wait_for_messages` blocked, a REST send acknowledged: how long until the wait's
/// answer arrives, measured from the acknowledgement.
async fn wait_release(server: &ServerProcess, agents: &[AgentCreds]) -> Row {
    // Two of the load's senders: their own inboxes are empty, so entry i is seq i + 1.
    let (waiter, sender) = (&agents[1], &agents[2]);
    let http = reqwest::Client::new();
    let mut release_us = Vec::with_capacity(WAITS);
    for i in 0..WAITS {
        let arguments = format!(r#"{{"after_seq":{i},"timeout_ms":10000}}"#);
        let wait = tokio::spawn({
            let waiting = mcp_post(
                server.base(),
                waiter.token.clone(),
                "wait_for_messages",
                arguments,
            );
            async move {
                let text = waiting.await;
                (Instant::now(), text)
            }
        });
        // Let the wait block first.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let res = http
            .post(format!("{}/v1/messages", server.base()))
            .bearer_auth(&sender.token)
            .json(&serde_json::json!({"sender_agent_id": sender.id,
                "recipient_agent_ids": [waiter.id], "message_type": "information",
                "content": {"text": format!("wake {i}")}}))
            .send()
            .await
            .expect("REST answers");
        let acked = Instant::now();
        assert_eq!(res.status(), 201);
        let (released, text) = wait.await.expect("wait task");
        assert!(text.contains(&format!("wake {i}")), "{text}");
        let us = released.saturating_duration_since(acked).as_micros();
        release_us.push(u32::try_from(us).unwrap_or(u32::MAX));
    }
    row(
        "mcp",
        format!("wait_for_messages released by a REST send, {WAITS} times"),
        String::new(),
        format!("{:.2} ms", quantile_ms(&mut release_us, 0.50)),
        format!("{:.2} ms", quantile_ms(&mut release_us, 0.99)),
        server.rss_kib(),
        "from the send's 201 to the wait's answer (target p99 ≤ 5 ms)".into(),
    )
}
