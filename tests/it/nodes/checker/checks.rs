//! The checker proper: what the history must show (see the parent module).

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::{Event, What};
use crate::process::{Process, every_inbox_entry};

/// The real-time checks over each worker's history: a read that began after a write's
/// answer agrees with it.
pub(super) fn check_history(history: &[Event]) -> Vec<String> {
    let mut violations = Vec::new();
    // For each agent: when its registration was answered, and when its removal was.
    let mut registered: HashMap<&str, Instant> = HashMap::new();
    let mut removed: HashMap<&str, Instant> = HashMap::new();
    let mut sent: HashMap<&str, Instant> = HashMap::new();
    let mut submitted: HashMap<&str, Instant> = HashMap::new();
    let mut marked: HashMap<&str, Instant> = HashMap::new();
    let mut by_time: Vec<&Event> = history.iter().collect();
    by_time.sort_by_key(|e| e.completed);
    for e in &by_time {
        match (&e.what, e.status) {
            (What::Register { agent }, Some(201)) => {
                registered.insert(agent, e.completed);
            }
            (What::Remove { agent }, Some(200)) => {
                removed.insert(agent, e.completed);
            }
            (What::Send { id: Some(id), .. }, Some(201))
            | (What::Write { id: Some(id), .. }, Some(200..=299)) => {
                sent.insert(id, e.completed);
            }
            (What::SubmitTask { task }, Some(201)) => {
                submitted.insert(task, e.completed);
            }
            (What::MarkRead { id }, Some(200)) => {
                marked.insert(id, e.completed);
            }
            _ => {}
        }
    }
    for e in history {
        let Some(status) = e.status else { continue };
        if status == 503 {
            continue;
        }
        let after = |at: Option<&Instant>| at.is_some_and(|at| *at < e.invoked);
        let wrong = match &e.what {
            What::ReadMessage { id } if after(sent.get(id.as_str())) => status != 200,
            What::ReadMark { id, read } if after(marked.get(id.as_str())) => status != 200 || !read,
            // The assignee finishes, through another node, a task submitted before.
            What::FinishTask { task } if after(submitted.get(task.as_str())) => status != 200,
            What::UseToken { agent } if after(removed.get(agent.as_str())) => status != 401,
            What::UseToken { agent } if after(registered.get(agent.as_str())) => {
                !removed.contains_key(agent.as_str()) && status != 200
            }
            What::Send { to, .. } if after(registered.get(to.as_str())) => {
                !removed.contains_key(to.as_str()) && status != 201
            }
            What::Send { to, .. } if to.starts_with('w') => status != 201,
            _ => false,
        };
        if wrong {
            violations.push(format!(
                "worker {} on node {}: {:?} answered {status} {}",
                e.worker,
                e.node,
                e.what,
                e.refusal.as_deref().unwrap_or("")
            ));
        }
    }
    violations
}

/// After the faults: every acknowledged message is in its recipient's inbox through every
/// node, seqs `1..=n` and the same order everywhere.
pub(super) async fn check_inboxes(
    http: &reqwest::Client,
    nodes: &[Process],
    history: &[Event],
    tokens: &[(String, String)],
) -> Vec<String> {
    let mut violations = Vec::new();
    let mut acked: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in history {
        if let (What::Send { to, id: Some(id) }, Some(201)) = (&e.what, e.status) {
            acked.entry(to.as_str()).or_default().push(id.as_str());
        }
    }
    for (agent, token) in tokens {
        let mut first: Option<Vec<(i64, String)>> = None;
        for (i, node) in nodes.iter().enumerate() {
            let entries = every_inbox_entry(http, node, token).await;
            let seqs: Vec<i64> = entries.iter().map(|(s, _)| *s).collect();
            if seqs != (1..=seqs.len() as i64).collect::<Vec<_>>() {
                violations.push(format!(
                    "{agent} through node {i}: seqs not 1..=n: {seqs:?}"
                ));
            }
            for id in acked.get(agent.as_str()).into_iter().flatten() {
                if !entries.iter().any(|(_, e)| e == id) {
                    violations.push(format!(
                        "{agent} through node {i}: acknowledged {id} missing"
                    ));
                }
            }
            match &first {
                None => first = Some(entries),
                Some(seen) if *seen != entries => {
                    violations.push(format!("{agent}: node {i} reads another inbox than node 0"));
                }
                Some(_) => {}
            }
        }
    }
    violations
}
