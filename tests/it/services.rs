//! The core's services as the code has them and as `docs/architecture.md` lists them: the
//! same, so the map cannot fall behind (issue 64). The core's entry type keeps a handful
//! of public methods; everything else a transport needs is a method of a service, each
//! with at most `MAX_SERVICE_METHODS`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Public methods of the core's entry type besides the service accessors.
const CORE_OWN: &[&str] = &["open", "dispatch"];
const MAX_CORE_PUBLIC: usize = 10;
const MAX_SERVICE_METHODS: usize = 15;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The name of a public method declared on this line of an impl block, if any.
fn public_method(line: &str) -> Option<String> {
    let rest = line.strip_prefix("    pub ")?;
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    let rest = rest.strip_prefix("fn ")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_'))?;
    Some(rest[..end].to_owned())
}

/// Public methods per implemented type (`impl Core`, `impl<'a> Live<'a>`) in `src/core/`.
fn public_methods() -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core"),
        &mut files,
    );
    let mut methods: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable source");
        let mut current: Option<String> = None;
        for line in text.lines() {
            if let Some(head) = line.strip_prefix("impl") {
                let head = head.strip_prefix("<'a>").unwrap_or(head).trim();
                let name: String = head
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                current = (!head.contains(" for ")).then_some(name);
            } else if line == "}" {
                current = None;
            } else if let (Some(owner), Some(method)) = (&current, public_method(line)) {
                methods.entry(owner.clone()).or_default().insert(method);
            }
        }
    }
    methods
}

/// The services the core declares (`services!` in `src/core/mod.rs`): type and accessor.
fn declared_services() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core/mod.rs");
    let text = std::fs::read_to_string(path).expect("core/mod.rs");
    let block = text
        .split("services! {\n")
        .nth(1)
        .and_then(|rest| rest.split("\n}").next())
        .expect("the services! invocation in core/mod.rs");
    block
        .lines()
        .filter_map(|line| {
            let line = line.trim().strip_suffix(';')?;
            let (name, accessor) = line.split_once(" by ")?;
            Some((name.to_owned(), accessor.to_owned()))
        })
        .collect()
}

/// The services table of `docs/architecture.md`: service type → methods.
fn documented_services() -> BTreeMap<String, BTreeSet<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md");
    let text = std::fs::read_to_string(path).expect("architecture.md");
    let mut table = BTreeMap::new();
    for line in text.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | `Live` (`core.live()`) | `connect`, … | why |
        if cells.len() < 4 || !cells[1].starts_with('`') || !cells[1].contains("(`core.") {
            continue;
        }
        let name = cells[1].trim_start_matches('`');
        let name = &name[..name.find('`').expect("closing backtick")];
        let methods = cells[2]
            .split(',')
            .map(|m| m.trim().trim_matches('`').to_owned())
            .filter(|m| !m.is_empty())
            .collect();
        table.insert(name.to_owned(), methods);
    }
    table
}

#[test]
fn the_services_map_is_the_code() {
    let methods = public_methods();
    let services = declared_services();
    assert!(services.len() >= 5, "services! not found: {services:?}");
    let documented = documented_services();
    let declared: BTreeSet<&String> = services.iter().map(|(name, _)| name).collect();
    assert_eq!(
        declared,
        documented.keys().collect(),
        "docs/architecture.md's services table lists other services than core/mod.rs"
    );
    for (service, _) in &services {
        let code = methods.get(service).cloned().unwrap_or_default();
        assert_eq!(
            &code, &documented[service],
            "{service}: the code's public methods (left) and architecture.md's (right)"
        );
        assert!(
            !code.is_empty() && code.len() <= MAX_SERVICE_METHODS,
            "{service} has {} public methods (1 to {MAX_SERVICE_METHODS})",
            code.len()
        );
    }
}

#[test]
fn the_core_keeps_a_handful_of_public_methods() {
    let own = public_methods().remove("Core").unwrap_or_default();
    let expected: BTreeSet<String> = CORE_OWN.iter().map(|m| (*m).to_owned()).collect();
    assert_eq!(
        own, expected,
        "a public method on Core belongs to a service (core/mod.rs `services!`)"
    );
    let total = own.len() + declared_services().len();
    assert!(total <= MAX_CORE_PUBLIC, "Core has {total} public methods");
}
