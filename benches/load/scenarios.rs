//! The scenarios, in the order they run. Each issue that names a figure adds one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, StatusCode};

use crate::Opts;
use crate::harness::{Row, ServerProcess, http_load};

type Scenario = fn(Opts) -> Pin<Box<dyn Future<Output = Vec<Row>>>>;

pub const ALL: &[(&str, Scenario)] = &[("healthz", |o| Box::pin(healthz(o)))];

/// The HTTP ceiling: a constant answer, no storage.
async fn healthz(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[]);
    let host = server.addr.to_string();
    let make = Arc::new(move |_: usize, _: u64| {
        Request::get("/healthz")
            .header("host", host.as_str())
            .body(Full::new(Bytes::new()))
            .expect("request")
    });
    let result = http_load(
        server.addr,
        opts.connections,
        opts.warmup(),
        opts.duration(),
        StatusCode::OK,
        make,
    )
    .await;
    vec![Row::from_load(
        "healthz",
        format!("{} conns", opts.connections),
        result,
        server.rss_kib(),
        "HTTP ceiling".to_owned(),
    )]
}
