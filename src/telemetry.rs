//! Logging and metrics setup.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the global tracing subscriber. The level comes from `RUST_LOG`; without it,
/// `info` for Switchboard and `warn` for the libraries, which are chatty at `info`.
///
/// The MCP SDK (`rmcp`) logs at `info` what peers wrote, whole: a client's `clientInfo`
/// (a 900 KB name made a 900 KB line), notifications, cancellation reasons. It is held
/// at `warn` whatever `RUST_LOG` says, unless `RUST_LOG` names it.
pub fn init(format: LogFormat) {
    let env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty());
    let directives = match &env {
        Some(env) if env.contains("rmcp") => env.clone(),
        Some(env) => format!("{env},rmcp=warn"),
        None => "info,sqlx=warn,tower_http=warn,hyper=warn,rmcp=warn".to_owned(),
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|err| {
        eprintln!("RUST_LOG is not a filter ({err}); logging at info");
        EnvFilter::new("info,sqlx=warn,tower_http=warn,hyper=warn,rmcp=warn")
    });
    // Colour codes only on a terminal: in a file or a log collector they are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Err(err) = result {
        eprintln!("logging was already set up: {err}");
    }
}

/// How often histogram samples are folded into their buckets.
const UPKEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Renders the process's metrics. The recorder is process-wide (the `metrics` macros
/// use a global one), so several servers in one process (tests) share it.
#[derive(Clone)]
pub struct MetricsHandle(PrometheusHandle);

impl MetricsHandle {
    /// Installs the process-wide recorder on first use.
    pub fn global() -> MetricsHandle {
        static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
        let handle = HANDLE.get_or_init(|| {
            let seconds = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0,
            ];
            let sizes = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &seconds)
                .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_size".into()), &sizes));
            let recorder = match builder {
                Ok(b) => b.build_recorder(),
                Err(_) => PrometheusBuilder::new().build_recorder(),
            };
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; /metrics may be empty");
            }
            // Histogram samples are kept one by one until a scrape or an upkeep folds
            // them into their buckets: a server nobody scrapes grew by every request's
            // samples (about 8 MiB a minute at 5,500 operations/s in the soak). A thread,
            // not a task: the recorder outlives any one runtime (tests start several).
            let upkeep = handle.clone();
            let spawned = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(crate::ticks::every(UPKEEP_INTERVAL));
                        upkeep.run_upkeep();
                    }
                });
            if let Err(err) = spawned {
                tracing::warn!(error = %err, "metrics upkeep thread did not start");
            }
            handle
        });
        MetricsHandle(handle.clone())
    }

    pub fn render(&self) -> String {
        self.0.render()
    }
}
