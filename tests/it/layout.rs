//! The layout's one rule: every arrow points one way (A → B: A uses B).
//!
//! model → types; store → model, types; hub → model, types; core → model, store, hub,
//! types; each transport → core, types (and the shared `transport::common`); nothing
//! imports a transport but the server's wiring; no two transports import each other; the
//! client crate → types only; `ticks` (how often background work runs) → nothing,
//! read by every component with a timer.
//!
//! The test reads every source file, resolves each `crate::…` and `super::…` path to the
//! component it names, and fails on an arrow the table does not allow. A new transport
//! is a new row.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Which components each component may use (itself always).
const ALLOWED: &[(&str, &[&str])] = &[
    ("model", &[]),
    ("store", &["model", "ticks"]),
    ("hub", &["model"]),
    ("core", &["model", "store", "hub", "ticks"]),
    ("transport::common", &["core"]),
    (
        "transport::http",
        &["transport::common", "core", "telemetry"],
    ),
    ("transport::ws", &["transport::common", "core"]),
    ("transport::stomp", &["transport::common", "core"]),
    ("transport::mcp", &["transport::common", "core", "ticks"]),
    ("transport::a2a", &["transport::common", "core", "ticks"]),
    ("transport", &[]),
    ("callbacks", &["core", "ticks"]),
    // Exports the core's spans (as callbacks deliver the core's notifications).
    ("otlp", &["core"]),
    ("cli", &["yaml"]),
    // Files a person writes (settings, team files), read with the line of every problem.
    ("yaml", &[]),
    ("config_file", &["config", "yaml"]),
    ("telemetry", &["ticks"]),
    // How often background work runs: every component with a timer reads it.
    ("ticks", &[]),
    ("config", &["cli", "telemetry"]),
    // The wiring composes everything.
    ("server", &["*"]),
    ("lib", &["*"]),
    ("main", &["*"]),
];

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/` (`src/core/tasks/mod.rs` → `core::tasks`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The component a module path belongs to: its first segment, or its first two under
/// `transport` (each transport is a component of its own).
fn component(path: &[String]) -> String {
    match path {
        [first, second, ..] if first == "transport" => format!("transport::{second}"),
        [first, ..] => first.clone(),
        [] => "lib".to_owned(),
    }
}

/// Every path the code names with `crate::` or `super::`, resolved to a module path.
/// Comments are skipped; a `use` group (`crate::core::{a, b}`) counts by its prefix.
/// Unit tests (by convention the `#[cfg(test)]` module at the end of a file) are not
/// read: their `super` is the file's own module.
fn named_paths(module: &[String], is_mod_file: bool, source: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for line in source.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
        let code = line.split("//").next().unwrap_or("");
        for (start, _) in code
            .match_indices("crate::")
            .chain(code.match_indices("super::"))
        {
            let before = code[..start].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[start..];
            let segments: Vec<&str> = rest
                .split("::")
                .take_while(|s| !s.is_empty())
                .map(|s| {
                    s.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or("")
                })
                .take_while(|s| !s.is_empty())
                .collect();
            found.push(resolve(module, is_mod_file, &segments));
        }
    }
    found
}

fn resolve(module: &[String], is_mod_file: bool, segments: &[&str]) -> Vec<String> {
    let mut base: Vec<String> = match segments.first() {
        Some(&"crate") => Vec::new(),
        // In `a/b.rs`, `super` is `a`; in `a/b/mod.rs` (module `a::b`) it is `a` too.
        _ => {
            let mut base = module.to_vec();
            if !is_mod_file || !base.is_empty() {
                base.pop();
            }
            base
        }
    };
    for segment in &segments[1..] {
        if *segment == "super" {
            base.pop();
        } else {
            base.push((*segment).to_owned());
        }
    }
    base
}

#[test]
fn every_use_points_the_allowed_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    source_files(&src, &mut files);
    let known: BTreeSet<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        let from = component(&module);
        let Some((_, allowed)) = ALLOWED.iter().find(|(name, _)| *name == from) else {
            panic!(
                "{} belongs to component {from}, which the table does not know",
                file.display()
            );
        };
        let is_mod_file = file.file_name().is_some_and(|n| n == "mod.rs");
        let source = std::fs::read_to_string(file).expect("readable source");
        for path in named_paths(&module, is_mod_file, &source) {
            let to = component(&path);
            let ok = to == from
                || allowed.contains(&"*")
                || allowed.contains(&to.as_str())
                || !known.contains(to.as_str()) && path.len() <= 1;
            if !ok {
                wrong.push(format!(
                    "{}: {from} → {to} ({})",
                    file.display(),
                    path.join("::")
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "arrows the layout does not allow:\n{}",
        wrong.join("\n")
    );
}

/// The crates below the server stay free of its dependencies: the wire types need no
/// runtime, database or web framework, and the client no database or server framework.
#[test]
fn the_types_and_client_crates_stay_light() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates");
    for (name, forbidden) in [
        (
            "switchboard-types",
            &["tokio", "sqlx", "axum", "reqwest", "switchboard"][..],
        ),
        (
            "switchboard-client",
            &["sqlx", "axum", "utoipa", "switchboard ="][..],
        ),
    ] {
        let manifest =
            std::fs::read_to_string(crates.join(name).join("Cargo.toml")).expect("manifest");
        let dependencies = manifest
            .split("[dependencies]")
            .nth(1)
            .expect("a [dependencies] table");
        for dep in forbidden {
            let named = dependencies.lines().any(|l| {
                l.trim_start().starts_with(&format!("{dep} "))
                    || l.trim_start().starts_with(&format!("{dep}="))
                    || l.trim_start() == *dep
            });
            assert!(!named, "{name} depends on {dep}");
        }
        let mut files = Vec::new();
        source_files(&crates.join(name).join("src"), &mut files);
        for file in files {
            let source = std::fs::read_to_string(&file).expect("source");
            assert!(
                !source.contains("switchboard::"),
                "{} uses the server crate",
                file.display()
            );
        }
    }
}

/// The table above is checked against itself: a rule that names an unknown component
/// is a typo that would silently allow nothing.
#[test]
fn the_table_names_known_components() {
    let known: BTreeSet<&str> = ALLOWED.iter().map(|(name, _)| *name).collect();
    for (name, allowed) in ALLOWED {
        for to in *allowed {
            assert!(
                *to == "*" || known.contains(to),
                "{name} allows unknown {to}"
            );
        }
    }
}

/// The longest function a reader must hold in their head, in lines (signature to closing
/// brace). Long functions are split by step; the rule covers tests and benchmarks too,
/// since a 300-line test is as hard to trust as a 300-line handler.
const MAX_FUNCTION_LINES: usize = 80;

/// Collects every function (free, method, trait default, nested) longer than the bound.
struct LongFunctions<'a> {
    file: &'a Path,
    found: Vec<String>,
}

impl LongFunctions<'_> {
    /// From the signature (doc comments and attributes do not count) to the brace.
    fn measure(&mut self, sig: &syn::Signature, end: proc_macro2::Span) {
        let start = syn::spanned::Spanned::span(sig).start().line;
        let lines = end.end().line - start + 1;
        let name = &sig.ident;
        if lines > MAX_FUNCTION_LINES {
            self.found.push(format!(
                "{}:{} {name}: {lines} lines",
                self.file.display(),
                start
            ));
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for LongFunctions<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.measure(&item.sig, syn::spanned::Spanned::span(item));
        syn::visit::visit_item_fn(self, item);
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.measure(&item.sig, syn::spanned::Spanned::span(item));
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if item.default.is_some() {
            self.measure(&item.sig, syn::spanned::Spanned::span(item));
        }
        syn::visit::visit_trait_item_fn(self, item);
    }
}

/// The longest source file, in lines: past it a file holds more than one responsibility.
const MAX_FILE_LINES: usize = 600;

/// Every Rust file of the project (server, crates, tests, benchmarks).
fn project_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches"] {
        source_files(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 50,
        "the walk found only {} files",
        files.len()
    );
    files
}

#[test]
fn no_source_file_is_longer_than_the_bound() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let long: Vec<String> = project_files(root)
        .iter()
        .filter_map(|file| {
            let lines = std::fs::read_to_string(file)
                .expect("readable")
                .lines()
                .count();
            (lines > MAX_FILE_LINES).then(|| format!("{}: {lines} lines", file.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by responsibility):\n{}",
        long.join("\n")
    );
}

#[test]
fn no_function_is_longer_than_the_bound() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = project_files(root);
    let mut long = Vec::new();
    for file in &files {
        let source = std::fs::read_to_string(file).expect("readable source");
        let parsed = syn::parse_file(&source)
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", file.display()));
        let mut visitor = LongFunctions {
            file: file.strip_prefix(root).unwrap_or(file),
            found: Vec::new(),
        };
        syn::visit::Visit::visit_file(&mut visitor, &parsed);
        long.extend(visitor.found);
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines (split them by step):\n{}",
        long.join("\n")
    );
}
