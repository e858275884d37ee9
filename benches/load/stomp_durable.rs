//! Durable SEND (#63): Switchboard with `--durability full` (every receipt after an
//! fsync of the batch that holds it, as a power cut would need) against RabbitMQ's
//! persistent messages on durable queues with publisher confirms, 64 producers each with
//! one SEND in flight, in alternating slices. Target: ≥ 2× RabbitMQ's rate, receipt p99
//! below it.
//!
//! RabbitMQ is driven through its STOMP plugin, as in the `stomp` scenario: a `SEND` to
//! a `/queue/` destination with `persistent:true` and a `receipt` header is a
//! `delivery_mode 2` publish to a durable queue whose `RECEIPT` the plugin sends only
//! when the broker confirms the publish (the plugin turns publisher confirms on for the
//! receipt), so each producer has exactly one confirm outstanding, as an AMQP publisher
//! waiting for each confirm would. One client library measures both brokers, so the
//! ratio is the brokers' and not two clients'.

use crate::Opts;
use crate::harness::{Row, ServerProcess, Setup};
use crate::live::row;
use crate::stomp::{
    RABBIT_NAME, SLICES, Slice, alternate, rabbit_broker, slice, switchboard_broker, to_row,
};

/// Producers (each with its consumer), one SEND in flight each.
const PAIRS: usize = 64;

/// Durable SEND/s and receipt latency, Switchboard (`--durability full`) against
/// RabbitMQ (persistent + confirms), same run.
pub async fn stomp_durable(opts: Opts) -> Vec<Row> {
    let server = ServerProcess::start(&[
        "--stomp-listen",
        "127.0.0.1:0",
        "--ws-max-per-agent",
        "64",
        "--durability",
        "full",
    ]);
    let (_, agents) = Setup::new(&server)
        .team("durable", "d", 2 * PAIRS, &[])
        .await;
    let ours = switchboard_broker(&server, &agents);
    let rabbit = rabbit_broker(PAIRS);
    let epoch = std::time::Instant::now();
    let length = opts.duration() / SLICES as u32;
    let _ = slice(&ours, opts.warmup(), epoch, None).await;
    let (sb, rb) = alternate(&ours, &rabbit, length, epoch, None).await;
    let rabbit_ok = rb.is_some();
    let rb = rb.unwrap_or_default();
    let rate = |s: &Slice| s.receipts as f64 / s.elapsed.as_secs_f64().max(0.001);
    let (sb_rate, rb_rate) = (rate(&sb), rate(&rb));
    const HOW: &str = "durable, receipt per SEND";
    let mut rows = vec![to_row(
        "switchboard --durability full",
        PAIRS,
        HOW,
        sb,
        server.rss_kib(),
    )];
    if rabbit_ok {
        let mut rabbit_row = to_row(RABBIT_NAME, PAIRS, "confirmed, receipt per SEND", rb, 0);
        rabbit_row.rss = "—".into();
        rows.push(rabbit_row);
        rows.push(row(
            "stomp_durable",
            "ratio".into(),
            format!("{:.2}× RabbitMQ", sb_rate / rb_rate.max(0.001)),
            String::new(),
            String::new(),
            0,
            "Switchboard (fsync per batch) SEND/s ÷ RabbitMQ (persistent, confirmed) SEND/s, same run; target ≥ 2×".into(),
        ));
    }
    for row in &mut rows {
        row.scenario = "stomp_durable".into();
    }
    rows
}
