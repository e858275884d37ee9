//! STOMP (#12): durable producer/consumer pairs against Switchboard and, in the same run,
//! against RabbitMQ's STOMP plugin (target: Switchboard's throughput ≥ RabbitMQ's with a
//! lower p99), and the memory of idle STOMP connections (target ≤ 20 KiB each).
//!
//! Each producer sends with a `receipt` and waits for it (a receipt means committed:
//! stored by Switchboard; on RabbitMQ, a persistent message to a durable queue, confirmed)
//! before the next; each consumer holds an `auto` subscription to its own queue. The
//! body carries the send time, so the consumer measures SEND → MESSAGE. Slices alternate
//! between the brokers so both see the same moments of the machine.
//!
//! Then both brokers again at the **same offered load**: every producer paced to send
//! at a fixed rate (together 80 % of the slower broker's closed-loop throughput, in
//! hundreds), so the latencies compare at equal work. Without pacing the faster broker
//! carries more messages per second on the same two cores (shared with this load
//! generator), and its p99 shows that queueing as much as the broker. RabbitMQ is expected
//! on 127.0.0.1:61613 (`rabbitmq-plugins enable rabbitmq_stomp`); without it, only
//! Switchboard's rows are printed.
//!
//! Every row also says the CPU time the broker spent per confirmed SEND while its
//! producers ran (Switchboard's split by thread: the request runtime, the writer,
//! SQLite's threads): on two cores shared with the load generator, a broker's tail is
//! largely everyone's wait for a core, so its cost per message is part of its latency.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use switchboard::transport::stomp::frame::{Command, Frame, Incoming, Limits, StompCodec};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_util::codec::Framed;

use crate::Opts;
use crate::cpu::{cpu_note, named_micros, spent, thread_micros};
use crate::harness::{AgentCreds, Row, ServerProcess, Setup, quantile_ms};
use crate::live::row;

type Conn = Framed<TcpStream, StompCodec>;

/// Producer/consumer pairs.
const PAIRS: usize = 32;
/// Slices per broker, alternating.
pub(crate) const SLICES: usize = 2;
const RABBIT: &str = "127.0.0.1:61613";

/// Who to connect as, and where to send.
#[derive(Clone)]
pub(crate) struct Broker {
    name: &'static str,
    addr: std::net::SocketAddr,
    /// `(login, passcode, extra headers)` of producer `i` and consumer `i`.
    producers: Vec<(Option<String>, String)>,
    consumers: Vec<(Option<String>, String)>,
    /// Destination of pair `i`, and the `_sender` of its bodies.
    queues: Vec<String>,
    senders: Vec<String>,
    /// Extra SEND headers (RabbitMQ: `persistent:true`).
    persistent: bool,
    /// Whose CPU time the broker's work is.
    cpu: Cpu,
}

/// Where a broker's CPU time is read.
#[derive(Clone, Copy)]
enum Cpu {
    /// Switchboard's process, thread by thread.
    Server(u32),
    /// Every process with this command name (RabbitMQ's Erlang VM).
    Named(&'static str),
}

impl Cpu {
    /// CPU µs so far, by kind of thread (one entry for a named process).
    fn read(self) -> BTreeMap<String, u64> {
        match self {
            Cpu::Server(pid) => thread_micros(pid),
            Cpu::Named(command) => BTreeMap::from([(command.to_owned(), named_micros(command))]),
        }
    }
}

async fn open(broker: &Broker, login: &Option<String>, passcode: &str) -> Option<Conn> {
    let stream = TcpStream::connect(broker.addr).await.ok()?;
    stream.set_nodelay(true).ok()?;
    let mut conn = Framed::new(stream, StompCodec::new(Limits::default()));
    let mut connect = Frame::new(Command::Connect)
        .header("accept-version", "1.2")
        .header("host", "/")
        .header("passcode", passcode);
    if let Some(login) = login {
        connect = connect.header("login", login.clone());
    }
    conn.send(Some(connect)).await.ok()?;
    match next_frame(&mut conn).await? {
        frame if frame.command == Command::Connected => Some(conn),
        frame => {
            eprintln!(
                "  {}: {:?} {:?}",
                broker.name,
                frame.command,
                frame.get("message")
            );
            None
        }
    }
}

async fn next_frame(conn: &mut Conn) -> Option<Frame> {
    loop {
        match conn.next().await? {
            Ok(Incoming::Frame(frame)) => return Some(frame),
            Ok(Incoming::HeartBeat) => {}
            Err(_) => return None,
        }
    }
}

/// With a context: a Wise queue is not handed a message without one (issue 62).
fn body(sender: &str, sent_us: u128) -> String {
    format!(
        "!wiseagents.WiseAgentMessage\n_context_name: bench\n_message: t={sent_us}\n\
         _message_type: QUERY\n_route_response_to: null\n_sender: {sender}\n_tool_id: null\n"
    )
}

/// The send time a body carries.
fn sent_at(body: &[u8]) -> Option<u128> {
    let text = std::str::from_utf8(body).ok()?;
    let digits = text.split("t=").nth(1)?;
    digits
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}

/// What one slice measured.
#[derive(Default)]
pub(crate) struct Slice {
    pub(crate) receipts: u64,
    pub(crate) elapsed: Duration,
    receipt_us: Vec<u32>,
    delivery_us: Vec<u32>,
    /// CPU µs the broker spent while the producers ran, by kind of thread.
    cpu: BTreeMap<String, u64>,
}

/// Runs every pair for `length`; `None` when the broker cannot be reached.
/// `pace`: when set, each producer sends one message per `pace` (on a fixed schedule,
/// producers staggered) instead of the next as soon as the last is confirmed.
pub(crate) async fn slice(
    broker: &Broker,
    length: Duration,
    epoch: Instant,
    pace: Option<Duration>,
) -> Option<Slice> {
    let mut consumers = Vec::new();
    for (i, (login, passcode)) in broker.consumers.iter().enumerate() {
        let mut conn = open(broker, login, passcode).await?;
        let subscribe = Frame::new(Command::Subscribe)
            .header("id", "0")
            .header("destination", broker.queues[i].clone())
            .header("ack", "auto")
            .header("receipt", "sub");
        conn.send(Some(subscribe)).await.ok()?;
        while next_frame(&mut conn).await?.command != Command::Receipt {}
        consumers.push(conn);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let delivery = Arc::new(Mutex::new(Vec::new()));
    let readers: Vec<_> = consumers
        .into_iter()
        .map(|conn| tokio::spawn(read(conn, stop.clone(), delivery.clone(), epoch)))
        .collect();
    let cpu_before = broker.cpu.read();
    let started = Instant::now();
    let mut producers = Vec::new();
    for (i, (login, passcode)) in broker.producers.iter().enumerate() {
        let conn = open(broker, login, passcode).await?;
        let send = Sender {
            queue: broker.queues[i].clone(),
            sender: broker.senders[i].clone(),
            persistent: broker.persistent,
            pace: pace.map(|p| (p, p * i as u32 / broker.producers.len() as u32)),
        };
        producers.push(tokio::spawn(send.run(conn, started, length, epoch)));
    }
    let mut out = Slice::default();
    for producer in producers {
        let latencies = producer.await.unwrap_or_default();
        out.receipts += latencies.len() as u64;
        out.receipt_us.extend(latencies);
    }
    out.elapsed = started.elapsed();
    out.cpu = spent(&cpu_before, &broker.cpu.read());
    // Let the last messages arrive, then stop the readers.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        let _ = reader.await;
    }
    out.delivery_us = std::mem::take(&mut *delivery.lock().await);
    Some(out)
}

/// A consumer: records SEND → MESSAGE for every message until stopped.
async fn read(
    mut conn: Conn,
    stop: Arc<AtomicBool>,
    delivery: Arc<Mutex<Vec<u32>>>,
    epoch: Instant,
) {
    let mut mine = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_millis(200), next_frame(&mut conn));
        match next.await {
            Ok(Some(frame)) if frame.command == Command::Message => {
                if let Some(sent) = sent_at(&frame.body) {
                    let now = epoch.elapsed().as_micros();
                    mine.push(u32::try_from(now.saturating_sub(sent)).unwrap_or(u32::MAX));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) if stop.load(Ordering::Relaxed) => break,
            Err(_) => {}
        }
    }
    delivery.lock().await.extend(mine);
}

/// A producer's destination and body.
struct Sender {
    queue: String,
    sender: String,
    persistent: bool,
    /// One SEND per this long, starting this far into the slice; `None`: closed loop.
    pace: Option<(Duration, Duration)>,
}

impl Sender {
    /// Sends and waits for each receipt until `length` has passed; the receipt latencies.
    async fn run(
        self,
        mut conn: Conn,
        started: Instant,
        length: Duration,
        epoch: Instant,
    ) -> Vec<u32> {
        let mut latencies = Vec::new();
        let mut n = 0u64;
        while started.elapsed() < length {
            if let Some((every, offset)) = self.pace {
                let due = started + offset + every * u32::try_from(n).unwrap_or(u32::MAX);
                tokio::time::sleep_until(due.into()).await;
                if started.elapsed() >= length {
                    break;
                }
            }
            let at = Instant::now();
            let mut send = Frame::new(Command::Send)
                .header("destination", self.queue.clone())
                .header("receipt", n.to_string());
            if self.persistent {
                send = send.header("persistent", "true");
            }
            let send = send.body(body(&self.sender, epoch.elapsed().as_micros()));
            if conn.send(Some(send)).await.is_err() {
                break;
            }
            match next_frame(&mut conn).await {
                Some(frame) if frame.command == Command::Receipt => {}
                other => {
                    let why = other.map(|f| (f.command, f.get("message").map(str::to_owned)));
                    eprintln!("  SEND answered {why:?}");
                    break;
                }
            }
            latencies.push(u32::try_from(at.elapsed().as_micros()).unwrap_or(u32::MAX));
            n += 1;
        }
        latencies
    }
}

/// Switchboard, a pair (producer, consumer) per two `agents`.
pub(crate) fn switchboard_broker(server: &ServerProcess, agents: &[AgentCreds]) -> Broker {
    let pairs = agents.len() / 2;
    let pair = |i: usize| (&agents[2 * i], &agents[2 * i + 1]);
    Broker {
        name: "switchboard",
        addr: server.stomp_addr.expect("STOMP listener"),
        producers: (0..pairs)
            .map(|i| (None, pair(i).0.token.clone()))
            .collect(),
        consumers: (0..pairs)
            .map(|i| (None, pair(i).1.token.clone()))
            .collect(),
        queues: (0..pairs)
            .map(|i| format!("/queue/request/{}", pair(i).1.id))
            .collect(),
        senders: (0..pairs).map(|i| pair(i).0.id.clone()).collect(),
        persistent: false,
        cpu: Cpu::Server(server.pid()),
    }
}

/// RabbitMQ's STOMP plugin, `pairs` pairs on durable queues.
pub(crate) fn rabbit_broker(pairs: usize) -> Broker {
    let guest = || (Some("guest".to_owned()), "guest".to_owned());
    Broker {
        name: "rabbitmq",
        addr: RABBIT.parse().expect("addr"),
        producers: (0..pairs).map(|_| guest()).collect(),
        consumers: (0..pairs).map(|_| guest()).collect(),
        // /queue/ destinations are durable queues on RabbitMQ.
        queues: (0..pairs)
            .map(|i| format!("/queue/switchboard-bench-{i}"))
            .collect(),
        senders: (0..pairs).map(|i| format!("p{i}")).collect(),
        persistent: true,
        cpu: Cpu::Named("beam.smp"),
    }
}

pub(crate) fn to_row(name: &str, pairs: usize, how: &str, mut total: Slice, rss: u64) -> Row {
    let per_second = total.receipts as f64 / total.elapsed.as_secs_f64().max(0.001);
    // Said first: such a run measured half the path (a `null` context did, unseen).
    let nothing = ["", "NOTHING DELIVERED; "]
        [usize::from(total.receipts > 0 && total.delivery_us.is_empty())];
    let note = format!(
        "{nothing}SEND→MESSAGE p50 {:.2} ms, p99 {:.2} ms ({} delivered); {}",
        quantile_ms(&mut total.delivery_us, 0.50),
        quantile_ms(&mut total.delivery_us, 0.99),
        total.delivery_us.len(),
        cpu_note(&total.cpu, total.receipts)
    );
    row(
        "stomp",
        format!(
            "{name}, {pairs} pair{}, {how}",
            if pairs == 1 { "" } else { "s" }
        ),
        format!("{per_second:.0} SEND/s"),
        format!("{:.2} ms", quantile_ms(&mut total.receipt_us, 0.50)),
        format!("{:.2} ms", quantile_ms(&mut total.receipt_us, 0.99)),
        rss,
        note,
    )
}

fn add(total: &mut Slice, part: Slice) {
    total.receipts += part.receipts;
    total.elapsed += part.elapsed;
    total.receipt_us.extend(part.receipt_us);
    total.delivery_us.extend(part.delivery_us);
    for (kind, us) in part.cpu {
        *total.cpu.entry(kind).or_insert(0) += us;
    }
}

/// Durable STOMP throughput and latency, Switchboard against RabbitMQ.
pub async fn stomp(opts: Opts) -> Vec<Row> {
    let server =
        ServerProcess::start(&["--stomp-listen", "127.0.0.1:0", "--ws-max-per-agent", "64"]);
    let (_, agents) = Setup::new(&server).team("stomp", "s", 2 * PAIRS, &[]).await;
    let ours = switchboard_broker(&server, &agents);
    let rabbit = rabbit_broker(PAIRS);
    let epoch = Instant::now();
    let length = opts.duration() / SLICES as u32;
    // Warm-up, unmeasured.
    let _ = slice(&ours, opts.warmup(), epoch, None).await;
    let (sb, rb) = alternate(&ours, &rabbit, length, epoch, None).await;
    let rabbit_ok = rb.is_some();
    let rb = rb.unwrap_or_default();
    let (sb_rate, rb_rate) = (
        sb.receipts as f64 / sb.elapsed.as_secs_f64().max(0.001),
        rb.receipts as f64 / rb.elapsed.as_secs_f64().max(0.001),
    );
    const CLOSED: &str = "receipt per SEND";
    let mut rows = vec![to_row("switchboard", PAIRS, CLOSED, sb, server.rss_kib())];
    if rabbit_ok {
        let mut rabbit_row = to_row(RABBIT_NAME, PAIRS, CLOSED, rb, 0);
        rabbit_row.rss = "—".into();
        rows.push(rabbit_row);
        rows.push(row(
            "stomp",
            "ratio".into(),
            format!("{:.2}× RabbitMQ", sb_rate / rb_rate.max(0.001)),
            String::new(),
            String::new(),
            0,
            "Switchboard SEND/s ÷ RabbitMQ SEND/s, same run".into(),
        ));
    }
    if rabbit_ok {
        let before = batch_buckets(&server).await;
        rows.extend(at_equal_load(&ours, &rabbit, sb_rate.min(rb_rate), length, epoch).await);
        eprintln!(
            "  Switchboard's writer while paced: {}",
            batch_profile(&before, &batch_buckets(&server).await)
        );
        rows.extend(serial(&ours, &rabbit, length, epoch).await);
    }
    rows
}

/// One producer and its consumer, closed loop: a SEND with nothing queued beside it, so
/// the fixed cost of every hop and of a commit shows, which the 32-pair rows spread over
/// their batches.
async fn serial(ours: &Broker, rabbit: &Broker, length: Duration, epoch: Instant) -> Vec<Row> {
    let first_pair = |b: &Broker| Broker {
        producers: b.producers[..1].to_vec(),
        consumers: b.consumers[..1].to_vec(),
        queues: b.queues[..1].to_vec(),
        senders: b.senders[..1].to_vec(),
        ..b.clone()
    };
    let (ours, rabbit) = (first_pair(ours), first_pair(rabbit));
    let (sb, rb) = alternate(&ours, &rabbit, length, epoch, None).await;
    let rb = rb.unwrap_or_default();
    const HOW: &str = "serial (one SEND at a time)";
    let mut rabbit_row = to_row(RABBIT_NAME, 1, HOW, rb, 0);
    rabbit_row.rss = "—".into();
    vec![to_row("switchboard", 1, HOW, sb, 0), rabbit_row]
}

/// Both brokers in `SLICES` alternating slices of `length`, Switchboard first, so both
/// see the same moments of the machine; RabbitMQ's total is `None` once it cannot be
/// reached (said once).
pub(crate) async fn alternate(
    ours: &Broker,
    rabbit: &Broker,
    length: Duration,
    epoch: Instant,
    pace: Option<Duration>,
) -> (Slice, Option<Slice>) {
    let (mut sb, mut rb) = (Slice::default(), Some(Slice::default()));
    for _ in 0..SLICES {
        let part = slice(ours, length, epoch, pace).await;
        add(&mut sb, part.expect("Switchboard's STOMP answers"));
        let Some(total) = rb.as_mut() else { continue };
        match slice(rabbit, length, epoch, pace).await {
            Some(part) => add(total, part),
            None => {
                eprintln!("  RabbitMQ's STOMP plugin is not reachable on {RABBIT}");
                rb = None;
            }
        }
    }
    (sb, rb)
}

pub(crate) const RABBIT_NAME: &str = "rabbitmq 3.10 (persistent, durable queue)";

/// Both brokers at the same offered load: 80 % of the slower one's closed-loop rate.
async fn at_equal_load(
    ours: &Broker,
    rabbit: &Broker,
    slower: f64,
    length: Duration,
    epoch: Instant,
) -> Vec<Row> {
    let rate = ((slower * 0.8 / 100.0).floor() * 100.0).max(100.0);
    let pace = Duration::from_secs_f64(PAIRS as f64 / rate);
    let (sb, rb) = alternate(ours, rabbit, length, epoch, Some(pace)).await;
    let rb = rb.unwrap_or_default();
    let how = format!("paced, {rate:.0} SEND/s offered to each");
    let mut rabbit_row = to_row(RABBIT_NAME, PAIRS, &how, rb, 0);
    rabbit_row.rss = "—".into();
    vec![to_row("switchboard", PAIRS, &how, sb, 0), rabbit_row]
}

/// Idle STOMP connections, each subscribed to a queue: server memory per connection.
///
/// On a server of its own, as `ws_idle` measures WebSocket connections: after the
/// throughput runs the heap is still settling (freed session buffers, page caches), and
/// that drift is not what a connection costs.
pub async fn idle(_opts: Opts) -> Vec<Row> {
    const CONNECTIONS: usize = 2000;
    let server =
        ServerProcess::start(&["--stomp-listen", "127.0.0.1:0", "--ws-max-per-agent", "64"]);
    let (_, agents) = Setup::new(&server).team("idle", "i", 2 * PAIRS, &[]).await;
    let broker = switchboard_broker(&server, &agents);
    // Warm the server (allocator pages, the agents' first reads) with one subscribed
    // connection before measuring.
    drop(subscribed(&broker, &agents[0]).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = server.rss_kib();
    let mut held = Vec::with_capacity(CONNECTIONS);
    for i in 0..CONNECTIONS {
        // Each agent subscribes to its response queue, many times over (the per-agent
        // limit is raised for this server).
        match subscribed(&broker, &agents[i % agents.len()]).await {
            Some(conn) => held.push(conn),
            None => break,
        }
    }
    // Sessions give their buffers back after 2 s of quiet: measure the idle state.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = server.rss_kib();
    let per = (after.saturating_sub(before)) as f64 / held.len().max(1) as f64;
    vec![row(
        "stomp_idle",
        format!("{} subscribed connections", held.len()),
        String::new(),
        String::new(),
        String::new(),
        after,
        format!(
            "{per:.1} KiB per connection (target ≤ 20); before {:.1} MiB",
            before as f64 / 1024.0
        ),
    )]
}

/// A connection of the agent subscribed to its response queue (with a receipt).
async fn subscribed(broker: &Broker, agent: &AgentCreds) -> Option<Conn> {
    let mut conn = open(broker, &None, &agent.token).await?;
    let subscribe = Frame::new(Command::Subscribe)
        .header("id", "0")
        .header("destination", format!("/queue/response/{}", agent.id))
        .header("receipt", "sub");
    conn.send(Some(subscribe)).await.ok()?;
    match next_frame(&mut conn).await {
        Some(frame) if frame.command == Command::Receipt => Some(conn),
        _ => None,
    }
}

/// The cumulative buckets of the writer's batch durations, from `/metrics`.
async fn batch_buckets(server: &ServerProcess) -> Vec<(String, f64)> {
    let url = format!("{}/metrics", server.base());
    let Ok(res) = reqwest::get(&url).await else {
        return Vec::new();
    };
    let text = res.text().await.unwrap_or_default();
    text.lines()
        .filter_map(|l| l.strip_prefix("switchboard_store_write_batch_seconds_bucket{le=\""))
        .filter_map(|l| {
            let (le, count) = l.split_once("\"} ")?;
            Some((le.to_owned(), count.trim().parse().ok()?))
        })
        .collect()
}

/// How the batches between two scrapes were spread over the bucket bounds: where a
/// receipt's tail comes from when it is the writer.
fn batch_profile(before: &[(String, f64)], after: &[(String, f64)]) -> String {
    let count = |set: &[(String, f64)], le: &str| {
        set.iter().find(|(l, _)| l == le).map_or(0.0, |(_, n)| *n)
    };
    let total = count(after, "+Inf") - count(before, "+Inf");
    if total <= 0.0 {
        return "no batches seen".into();
    }
    let share = |le: &str| 100.0 * (count(after, le) - count(before, le)) / total;
    format!(
        "{total:.0} batches; ≤ 0.5 ms {:.1} %, ≤ 1 ms {:.1} %, ≤ 2.5 ms {:.1} %, ≤ 5 ms {:.2} %, ≤ 10 ms {:.2} %",
        share("0.0005"),
        share("0.001"),
        share("0.0025"),
        share("0.005"),
        share("0.01"),
    )
}
