//! A fuzzer for every parser a client reaches, on the stable toolchain (`cargo fuzz`
//! needs nightly, which this project's machines do not have).
//!
//! Each target first replays its seeds and past findings (`fuzz/corpus/<target>/`),
//! then mutates them (byte-level and JSON-aware) for `FUZZ_SECONDS` (default 1) and
//! runs every input through the parser as a request would, in-process. A panic or a
//! broken invariant is a finding: the input is written to
//! `target/fuzz-findings/<target>/`, the run fails, and the file, moved into the
//! target's corpus, becomes a regression test replayed by every later run.
//!
//! `cargo test --test fuzz` runs it; `FUZZ_SECONDS=60 cargo test --release --test fuzz
//! -- callback_url` runs one target longer; `FUZZ_SEED` repeats a run.

mod mutate;
mod targets;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;

/// The message of the last panic, kept by the hook instead of printed.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A seed: which type it is for (its file name up to the first `.`) and its bytes.
struct Seed {
    kind: String,
    bytes: Vec<u8>,
}

fn corpus(target: &str) -> Vec<Seed> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut seeds: Vec<(PathBuf, Seed)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = name.split('.').next().unwrap_or_default().to_owned();
            let bytes = std::fs::read(entry.path()).expect("readable seed");
            (entry.path(), Seed { kind, bytes })
        })
        .collect();
    seeds.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!seeds.is_empty(), "{} has no seeds", dir.display());
    seeds.into_iter().map(|(_, seed)| seed).collect()
}

/// Runs one input; the finding, if any.
fn run(check: targets::Check, kind: &str, input: &[u8]) -> Option<String> {
    let outcome = std::panic::catch_unwind(|| check(kind, input));
    match outcome {
        Ok(Ok(())) => None,
        Ok(Err(broken)) => Some(broken),
        Err(_) => Some(format!(
            "panic: {}",
            PANIC
                .lock()
                .map(|p| p.clone())
                .ok()
                .flatten()
                .unwrap_or_default()
        )),
    }
}

fn save(target: &str, kind: &str, input: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/fuzz-findings")
        .join(target);
    std::fs::create_dir_all(&dir).expect("findings folder");
    let hash = input.iter().fold(0xcbf29ce484222325_u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x100000001b3)
    });
    let path = dir.join(format!("{kind}.finding-{hash:016x}"));
    std::fs::write(&path, input).expect("finding written");
    path
}

/// Fuzzes one target for `budget`; the number of inputs run, or the finding.
fn fuzz(
    target: &str,
    check: targets::Check,
    budget: Duration,
    rng: &mut StdRng,
) -> Result<u64, String> {
    let seeds = corpus(target);
    for seed in &seeds {
        if let Some(broken) = run(check, &seed.kind, &seed.bytes) {
            return Err(format!("seed {} of {target}: {broken}", seed.kind));
        }
    }
    let pool: Vec<Vec<u8>> = seeds.iter().map(|s| s.bytes.clone()).collect();
    let started = Instant::now();
    let mut runs = seeds.len() as u64;
    while started.elapsed() < budget {
        let Some(seed) = seeds.choose(rng) else { break };
        let input = mutate::mutate(rng, &seed.bytes, &pool);
        runs += 1;
        if let Some(broken) = run(check, &seed.kind, &input) {
            let path = save(target, &seed.kind, &input);
            return Err(format!(
                "{target}: {broken}\n  input saved to {}\n  input: {:?}",
                path.display(),
                String::from_utf8_lossy(&input[..input.len().min(600)])
            ));
        }
    }
    Ok(runs)
}

fn main() {
    let budget = std::env::var("FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(1.0);
    let seed = std::env::var("FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    // Arguments from `cargo test [FILTER] -- [ARGS]`: the first that is not a flag
    // selects targets by substring, as libtest does with test names.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    std::panic::set_hook(Box::new(|info| {
        if let Ok(mut last) = PANIC.lock() {
            *last = Some(info.to_string());
        }
    }));
    println!("fuzz: FUZZ_SEED={seed}, {budget} s per target");
    let mut failed = Vec::new();
    for (name, check) in targets::TARGETS {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let mut rng = StdRng::seed_from_u64(seed ^ name.len() as u64);
        match fuzz(name, *check, Duration::from_secs_f64(budget), &mut rng) {
            Ok(runs) => println!("fuzz {name}: {runs} inputs, nothing found"),
            Err(finding) => {
                println!("fuzz {name}: FOUND {finding}");
                failed.push(*name);
            }
        }
    }
    if !failed.is_empty() {
        println!("fuzz: findings in {failed:?} (FUZZ_SEED={seed} repeats the run)");
        std::process::exit(1);
    }
}
