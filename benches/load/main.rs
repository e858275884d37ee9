//! Switchboard's load benchmark: a program, not a timed test.
//!
//! `cargo bench --bench load` builds the server in release mode, starts it as a child
//! process on loopback with a fresh database, drives it with many concurrent real
//! connections and prints a table (rate, p50/p99 latency, server RSS). Name scenarios to
//! run a subset: `cargo bench --bench load -- healthz`.
//!
//! The load generator runs on the same machine as the server, so both share the CPU:
//! figures are for "server and client on one box", and `/healthz` is the ceiling every
//! other figure is compared with.

mod a2a;
mod ab;
mod checker;
mod claims;
mod console;
mod cpu;
mod fanout;
mod harness;
mod hostile;
mod hostile_caller;
mod hot;
mod leases;
mod live;
mod mcp;
mod postgres;
mod publish;
mod scenarios;
mod search;
mod slices;
mod slow;
mod soak;
mod soak_svg;
mod stomp;
mod stomp_durable;

use std::time::Duration;

use clap::Parser;

/// Options of the benchmark.
#[derive(Debug, Clone, Parser)]
pub struct Opts {
    /// Scenarios to run (all when none is named).
    pub scenarios: Vec<String>,
    /// Seconds of measurement per scenario.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Seconds of warm-up before measuring.
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Concurrent connections for HTTP scenarios.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Keep seeded databases (and the tokens to use them) in this folder and reuse them
    /// on later runs, so large data sets are seeded once.
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Minutes the soak, the several-nodes checker and the console run (`soak`,
    /// `nodes_checker`, `console`: only when named, never part of a run of every scenario).
    #[arg(long, default_value_t = 10)]
    pub minutes: u64,
    /// Accepted for compatibility with `cargo bench`'s own arguments.
    #[arg(long, hide = true)]
    pub bench: bool,
}

impl Opts {
    pub fn duration(&self) -> Duration {
        Duration::from_secs(self.duration)
    }

    pub fn warmup(&self) -> Duration {
        Duration::from_secs(self.warmup)
    }

    fn wants(&self, name: &str) -> bool {
        // The soak, the checker, the console and the search (1,000,000 messages seeded)
        // are long, and `send_ab` compares what
        // `BENCH_AB` names: they run only when named.
        let long = [
            "soak",
            "nodes_checker",
            "console",
            "send_ab",
            "search",
            "search_postgres",
        ]
        .contains(&name);
        (self.scenarios.is_empty() && !long) || self.scenarios.iter().any(|s| s == name)
    }
}

fn main() {
    let opts = Opts::parse();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut rows = Vec::new();
    runtime.block_on(async {
        for (name, scenario) in scenarios::ALL {
            if opts.wants(name) {
                eprintln!("running {name} …");
                rows.extend(scenario(opts.clone()).await);
            }
        }
    });
    harness::print_table(&rows);
}
