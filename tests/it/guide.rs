//! The README and the docs against the code: every flag's help is its own and
//! `docs/configuration.md` is that help; every path, flag and endpoint the pages name
//! exists. (The walkthroughs themselves run in `readme/`.)

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::python::root;

/// Every page a reader is pointed at: the README and everything under `docs/`.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut pages = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut pages);
    pages
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `serve`'s flags as clap knows them: (flag, environment variable, default, help).
fn serve_flags() -> Vec<(String, String, String, String)> {
    let cli = switchboard::config::Cli::command();
    let serve = cli.find_subcommand("serve").expect("serve").clone();
    serve
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|l| l != "help"))
        .map(|a| {
            let flag = format!("--{}", a.get_long().unwrap_or_default());
            let env = a
                .get_env()
                .map(|e| e.to_string_lossy().into_owned())
                .unwrap_or_default();
            let default = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(", ");
            let help = a.get_help().map(ToString::to_string).unwrap_or_default();
            (flag, env, default, help)
        })
        .collect()
}

/// Every flag's help says something, and something no other flag says: a doc comment
/// that slid onto the next field (as `--shutdown-timeout`'s did onto
/// `--retention-read-messages`) leaves one flag without help and another with two.
#[test]
fn every_flag_has_help_of_its_own() {
    let mut seen = BTreeSet::new();
    for (flag, env, _, help) in serve_flags() {
        assert!(!help.trim().is_empty(), "{flag} has no help");
        assert!(
            seen.insert(help.clone()),
            "{flag} repeats another flag's help"
        );
        assert_eq!(
            env,
            format!(
                "SWITCHBOARD_{}",
                flag.trim_start_matches("--")
                    .replace('-', "_")
                    .to_uppercase()
            ),
            "{flag}'s environment variable"
        );
        // A help is one paragraph for the operator: no note for the code's reader.
        assert!(!help.contains("(Checked by"), "{flag}: {help}");
    }
}

/// The same class for commands: every command of the CLI says what it does, in words no
/// sibling uses, and every argument says what it is. A doc comment that slid onto the
/// next variant (as `admin reset-token`'s did onto `admin approval`) leaves one command
/// bare and another describing its neighbour; an argument without one shows `--help`
/// a name and nothing else (43 of them did).
#[test]
fn every_command_and_argument_has_help_of_its_own() {
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        let mut seen = BTreeSet::new();
        for sub in command.get_subcommands() {
            let name = format!("{path} {}", sub.get_name());
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            assert!(!about.trim().is_empty(), "`{name}` has no help");
            assert!(seen.insert(about), "`{name}` repeats a sibling's help");
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                if !matches!(id, "help" | "version")
                    && !arg.is_global_set()
                    && help.trim().is_empty()
                {
                    missing.push(format!("`{name}` <{id}>"));
                }
            }
            walk(sub, &name, missing);
        }
    }
    let mut missing = Vec::new();
    walk(
        &switchboard::config::Cli::command(),
        "switchboard",
        &mut missing,
    );
    assert!(
        missing.is_empty(),
        "arguments without help:\n{}",
        missing.join("\n")
    );
}

/// The table between the markers of `docs/configuration.md`, made from the flags.
fn configuration_table() -> String {
    let mut table = String::from("| flag | environment | default | meaning |\n|---|---|---|---|\n");
    for (flag, env, default, help) in serve_flags() {
        let default = if default.is_empty() {
            "—".to_owned()
        } else {
            format!("`{default}`")
        };
        let help = help.replace('\n', " ").replace('|', "\\|");
        table.push_str(&format!("| `{flag}` | `{env}` | {default} | {help} |\n"));
    }
    table
}

const BEGIN: &str = "<!-- flags: generated from `switchboard serve --help`; do not edit -->\n";
const END: &str = "<!-- flags: end -->";

/// `docs/configuration.md`'s table is `serve --help`, flag for flag. After a change to a
/// flag, `SWITCHBOARD_UPDATE_DOCS=1 cargo test --test it -- guide::` rewrites it.
#[test]
fn the_configuration_page_is_the_flags_help() {
    let path = root().join("docs/configuration.md");
    let page = read(&path);
    let (before, rest) = page
        .split_once(BEGIN)
        .unwrap_or_else(|| panic!("docs/configuration.md lacks the marker {BEGIN}"));
    let (table, after) = rest.split_once(END).expect("the end marker");
    let wanted = configuration_table();
    if std::env::var("SWITCHBOARD_UPDATE_DOCS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, format!("{before}{BEGIN}{wanted}{END}{after}")).expect("write");
        return;
    }
    assert_eq!(
        table, wanted,
        "docs/configuration.md is stale: SWITCHBOARD_UPDATE_DOCS=1 cargo test --test it -- guide::"
    );
}

/// The repository paths a page names in code spans and links.
fn cited_paths(page: &Path, text: &str) -> Vec<(String, PathBuf)> {
    const ROOTS: &[&str] = &[
        "src/",
        "tests/",
        "crates/",
        "docs/",
        "migrations/",
        "benches/",
        "examples/",
        "deploy/",
        "fuzz/",
        "openapi/",
        ".ci/",
        ".cargo/",
    ];
    const FILES: &[&str] = &[
        "Cargo.toml",
        "Cargo.lock",
        "Dockerfile",
        "docker-compose.yml",
    ];
    let mut found = Vec::new();
    // Code spans.
    for (i, span) in text.split('`').enumerate() {
        if i % 2 == 0 {
            continue;
        }
        for word in span.split_whitespace() {
            let word = word.trim_matches(|c: char| "\"'(),;:".contains(c));
            let cited = ROOTS.iter().any(|r| word.starts_with(r)) || FILES.contains(&word);
            let placeholder = word.contains(['…', '<', '{', '*', '$']);
            if cited && !placeholder {
                found.push((word.to_owned(), root().join(word)));
            }
        }
    }
    // Markdown links to files of the repository, relative to the page.
    for part in text.split("](").skip(1) {
        let target = part.split(')').next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let dir = page.parent().expect("a page's folder");
        found.push((target.to_owned(), dir.join(target)));
    }
    found
}

/// Every file or folder a page names exists (the reviewer found `tests/it/access.rs` and
/// `server.rs` named after they had moved).
#[test]
fn every_path_the_docs_name_exists() {
    let mut missing = Vec::new();
    for page in pages() {
        let text = read(&page);
        for (cited, path) in cited_paths(&page, &text) {
            let path = PathBuf::from(path.to_string_lossy().trim_end_matches('/'));
            if !path.exists() {
                missing.push(format!("{}: {cited}", page.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but missing:\n{}",
        missing.join("\n")
    );
}

/// Every long flag of every `switchboard` command (and subcommand).
fn switchboard_flags() -> BTreeSet<String> {
    fn walk(command: &clap::Command, out: &mut BTreeSet<String>) {
        for arg in command.get_arguments() {
            if let Some(long) = arg.get_long() {
                out.insert(format!("--{long}"));
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut flags = BTreeSet::new();
    walk(&switchboard::config::Cli::command(), &mut flags);
    flags
}

/// Flags of other programs the pages show (cargo, docker, the MCP Inspector).
const OTHER_TOOLS: &[&str] = &[
    // benches/instructions.py
    "--stomp",
    "--bench",
    "--release",
    "--locked",
    "--test",
    "--version",
    "--help",
    "--path",
    "--example",
    "--ignored",
    "--exact",
    "--all-targets",
    "--check",
    "--build",
    "--cli",
    "--header",
    "--method",
    "--strict",
    "--skip",
    "--nocapture",
    // The A2A test kit's runner (docs/a2a.md).
    "--sut-host",
    "--transport",
    // callgrind_control, and the cost check's own (benches/cost_check.py).
    "--dump",
    "--write",
];

/// Every `--flag` a page names is one of ours (any command's), the load benchmark's (a
/// field of its options), or one of the few other programs' listed above; `--prefix-…`
/// stands for the flags that start so.
#[test]
fn every_flag_the_docs_name_exists() {
    let ours = switchboard_flags();
    let bench = read(&root().join("benches/load/main.rs"));
    let mut unknown = BTreeSet::new();
    for page in pages() {
        let text = read(&page);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("--") {
            let before = rest[..at].chars().last();
            rest = &rest[at..];
            let flag: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
                .collect();
            rest = &rest[flag.len().max(2)..];
            let word_start = before.is_none_or(|c| !c.is_alphanumeric() && c != '-');
            if !word_start
                || flag.len() < 4
                || !flag[2..].starts_with(|c: char| c.is_ascii_lowercase())
            {
                continue;
            }
            let prefix = flag.ends_with('-') && ours.iter().any(|f| f.starts_with(&flag));
            let field = format!("pub {}:", flag[2..].replace('-', "_"));
            let known = ours.contains(&flag)
                || prefix
                || bench.contains(&field)
                || OTHER_TOOLS.contains(&flag.as_str());
            if !known {
                unknown.insert(format!("{}: {flag}", page.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "flags nobody has:\n{}",
        unknown.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// The routes served beside the OpenAPI document's (other protocols' endpoints).
const OTHER_ROUTES: &[&str] = &[
    "GET /mcp",
    "POST /mcp",
    "DELETE /mcp",
    "GET /a2a/{}/agents",
    "GET /a2a/{}/{}/.well-known/agent-card.json",
    "POST /a2a/{}/{}",
    "GET /docs",
    "GET /openapi.json",
    "GET /console",
];

/// A path with every `{name}` made `{}` and any query string dropped.
fn route_shape(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let mut shape = String::new();
    let mut inside = false;
    for c in path.chars() {
        match c {
            '{' => {
                inside = true;
                shape.push('{');
            }
            '}' => {
                inside = false;
                shape.push('}');
            }
            _ if inside => {}
            _ => shape.push(c),
        }
    }
    shape.trim_end_matches(['.', ',', ')', '`']).to_owned()
}

/// Every `METHOD /path` a page names is served: in the OpenAPI document, or one of the
/// other protocols' routes.
#[test]
fn every_endpoint_the_docs_name_exists() {
    let doc = serde_json::to_value(switchboard::server::openapi_document()).expect("doc");
    let mut served: BTreeSet<String> = OTHER_ROUTES.iter().map(|r| (*r).to_owned()).collect();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("item").keys() {
            served.insert(format!("{} {}", method.to_uppercase(), route_shape(path)));
        }
    }
    // A page may name a concrete path (`GET /v1/tasks/parse-logs`): `{}` takes any segment.
    let is_served = |named: &str| {
        served.iter().any(|route| {
            let (a, b): (Vec<&str>, Vec<&str>) =
                (route.split('/').collect(), named.split('/').collect());
            a.len() == b.len()
                && a.iter()
                    .zip(&b)
                    .all(|(r, n)| r == n || (*r == "{}" && !n.is_empty()))
        })
    };
    let mut unknown = BTreeSet::new();
    for page in pages() {
        let text = read(&page);
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
            for part in text.split(&format!("{method} /")).skip(1) {
                let path: String = part
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '`' && *c != '|')
                    .collect();
                let shape = format!("{method} /{}", route_shape(&path));
                if !is_served(&shape) && !path.is_empty() {
                    unknown.insert(format!("{}: {shape}", page.display()));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "endpoints nobody serves:\n{}",
        unknown.into_iter().collect::<Vec<_>>().join("\n")
    );
}
