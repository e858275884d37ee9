//! CPU time spent by the processes under test, read from `/proc`.
//!
//! On this two-core machine the brokers and the load generator share the cores, so a
//! latency tail is partly everyone's queueing for them: the CPU a broker spends per
//! operation says how much of the machine it takes, and a server's per-thread split says
//! where its cost lands (the request runtime, the writer, SQLite's threads).

use std::collections::BTreeMap;

/// CPU time (user + system) in a `/proc/…/stat` file, in microseconds.
fn stat_micros(path: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0);
    // Linux reports CPU time in clock ticks of 1/100 s (USER_HZ).
    ticks * 10_000
}

/// CPU time of a process so far, in microseconds.
pub fn process_micros(pid: u32) -> u64 {
    stat_micros(&format!("/proc/{pid}/stat"))
}

/// CPU time of every process on this machine with this command name (`postgres`,
/// `beam.smp`), in microseconds.
pub fn named_micros(command: &str) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == command)
        })
        .map(process_micros)
        .sum()
}

/// CPU time of a process's threads so far, in microseconds, summed by kind of thread:
/// its name without a trailing number (`tokio-rt-worker`, `sqlx-sqlite-worker-3` →
/// `sqlx-sqlite-worker`; Linux keeps 15 characters of a name).
pub fn thread_micros(pid: u32) -> BTreeMap<String, u64> {
    let mut by_kind = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_kind;
    };
    for task in dir.filter_map(Result::ok) {
        let path = task.path();
        let Ok(name) = std::fs::read_to_string(path.join("comm")) else {
            continue;
        };
        let kind = name
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .trim_end_matches('-')
            .to_owned();
        let spent = stat_micros(&path.join("stat").to_string_lossy());
        *by_kind.entry(kind).or_insert(0) += spent;
    }
    by_kind
}

/// What each kind of thread spent between two readings of [`thread_micros`]. A thread
/// that ended in between loses its time (the server's threads live as long as it does).
pub fn spent(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    after
        .iter()
        .map(|(kind, t)| {
            let was = before.get(kind).copied().unwrap_or(0);
            (kind.clone(), t.saturating_sub(was))
        })
        .collect()
}

/// "CPU 86 µs/SEND (runtime 44, writer 36, sqlx 6, other 0)": the broker's CPU time per
/// confirmed SEND, and for Switchboard where it went. The writer's thread runs SQLite
/// itself for batches of staged posts (its direct connection); sqlx's worker threads run
/// the rest of the store's statements.
pub fn cpu_note(cpu: &BTreeMap<String, u64>, receipts: u64) -> String {
    let per = |us: u64| us as f64 / receipts.max(1) as f64;
    let mut parts: BTreeMap<&str, u64> = BTreeMap::new();
    for (kind, us) in cpu {
        let label = match kind.as_str() {
            "tokio-rt-worker" => "runtime",
            "switchboard-wri" => "writer",
            "sqlx-sqlite-wor" => "sqlx",
            "beam.smp" => "",
            _ => "other",
        };
        *parts.entry(label).or_insert(0) += us;
    }
    let total = per(parts.values().sum());
    let mut split: Vec<(&str, u64)> = parts.into_iter().filter(|(l, _)| !l.is_empty()).collect();
    if split.is_empty() {
        return format!("CPU {total:.0} µs/SEND");
    }
    split.sort_by_key(|s| std::cmp::Reverse(s.1));
    let split: Vec<String> = split
        .iter()
        .map(|(label, us)| format!("{label} {:.0}", per(*us)))
        .collect();
    format!("CPU {total:.0} µs/SEND ({})", split.join(", "))
}
