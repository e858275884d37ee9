//! `send_ab` (only when named): SEND_MESSAGE against several servers — other builds,
//! other settings — side by side in alternating slices, so a change is measured against
//! what it changed in one run. Separate runs on this machine drift by ±5 % from one to
//! the next, more than many changes are worth; slices give every side the same moments.
//!
//! `BENCH_AB` names the sides, `;`-separated, each `label=binary` followed by
//! `,NAME=VALUE` settings added to that server's environment; an empty binary is the
//! benchmark's own server (`docs/benchmarks.md`):
//!
//! ```sh
//! BENCH_AB="before=/tmp/before/release/switchboard;off=;on=,SWITCHBOARD_OTLP_ENDPOINT=http://127.0.0.1:4318" \
//!   cargo bench --bench load -- send_ab --duration 60
//! ```

use std::path::PathBuf;

use hyper::StatusCode;

use crate::Opts;
use crate::cpu::process_micros;
use crate::harness::{Launch, Row, ServerProcess, Setup};
use crate::scenarios::sends_to_first;
use crate::slices::{Side, interleaved_all};

/// Slices per side: more than `send_message`'s five, since the differences sought are
/// smaller.
const SLICES: u32 = 12;

/// One side as `BENCH_AB` names it.
#[derive(Debug, Clone)]
struct Named {
    label: String,
    launch: Launch,
}

/// The sides in `spec` (see the module's doc); an error names what it could not read.
fn parse(spec: &str) -> Result<Vec<Named>, String> {
    spec.split(';')
        .filter(|side| !side.trim().is_empty())
        .map(|side| {
            let (label, rest) = side
                .split_once('=')
                .ok_or_else(|| format!("`{side}`: no `label=`"))?;
            let mut parts = rest.split(',');
            let binary = parts.next().unwrap_or("").trim();
            let env = parts
                .map(|setting| {
                    let (name, value) = setting
                        .split_once('=')
                        .ok_or_else(|| format!("`{setting}`: a setting is NAME=VALUE"))?;
                    Ok((name.trim().to_owned(), value.trim().to_owned()))
                })
                .collect::<Result<_, String>>()?;
            Ok(Named {
                label: label.trim().to_owned(),
                launch: Launch {
                    binary: (!binary.is_empty()).then(|| PathBuf::from(binary)),
                    env,
                },
            })
        })
        .collect()
}

pub async fn send_ab(opts: Opts) -> Vec<Row> {
    let spec = std::env::var("BENCH_AB").unwrap_or_default();
    let named = match parse(&spec) {
        Ok(named) if named.len() >= 2 => named,
        Ok(_) => panic!("send_ab needs BENCH_AB with two sides or more (benches/load/ab.rs)"),
        Err(err) => panic!("BENCH_AB: {err}"),
    };
    let mut servers = Vec::new();
    let mut sides = Vec::new();
    for side in &named {
        let server = ServerProcess::start_as(&side.launch, &[]);
        let setup = Setup::new(&server);
        let (_, agents) = setup.team("bench", "a", opts.connections + 1, &[]).await;
        let agents = agents.into_iter().map(|a| (a.id, a.token)).collect();
        sides.push(Side {
            addr: server.addr,
            expect: StatusCode::CREATED,
            make: sends_to_first(&server, agents),
        });
        servers.push(server);
    }
    let before: Vec<u64> = servers.iter().map(|s| process_micros(s.pid())).collect();
    let results = interleaved_all(&opts, SLICES, &sides).await;
    let first_rate = results[0].per_second();
    let cpu: Vec<f64> = servers
        .iter()
        .zip(&before)
        .zip(&results)
        .map(|((server, before), result)| {
            let spent = process_micros(server.pid()).saturating_sub(*before);
            spent as f64 / result.answered.max(1) as f64
        })
        .collect();
    let mut rows = Vec::new();
    for (i, (result, side)) in results.into_iter().zip(&named).enumerate() {
        let note = format!(
            "{:+.1}% of {}'s rate; server CPU {:.1} µs per send ({:+.1}%)",
            100.0 * (result.per_second() / first_rate - 1.0),
            named[0].label,
            cpu[i],
            100.0 * (cpu[i] / cpu[0] - 1.0),
        );
        let rss = servers[i].rss_kib();
        rows.push(Row::from_load(
            "send_ab",
            side.label.clone(),
            result,
            rss,
            note,
        ));
    }
    rows
}
