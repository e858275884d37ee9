//! The container files cannot be built on this machine (no container engine), so what
//! can go stale in them is checked here: every `SWITCHBOARD_*` variable they set is one
//! `serve` reads, the compose nodes are the image the Dockerfile builds and listen where
//! the balancer and the image's health check look, and the balancer passes WebSockets
//! to every node.

use std::collections::BTreeSet;

fn read(path: &str) -> String {
    std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).expect(path)
}

/// The `SWITCHBOARD_*` names in `text`.
fn variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("SWITCHBOARD_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c == '_'))
            .unwrap_or(tail.len());
        // `SWITCHBOARD_*` in prose names them all, not one.
        if end > "SWITCHBOARD_".len() {
            names.insert(tail[..end].to_owned());
        }
        rest = &tail[end..];
    }
    names
}

#[test]
fn the_container_files_agree_with_the_server_and_each_other() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--help"])
        .output()
        .expect("serve --help");
    let help = String::from_utf8_lossy(&help.stdout);
    let known = variables(&help);
    let compose = read("docker-compose.yml");
    let dockerfile = read("Dockerfile");
    let nginx = read("deploy/nginx.conf");
    for (file, text) in [
        ("docker-compose.yml", &compose),
        ("Dockerfile", &dockerfile),
    ] {
        let unknown: Vec<String> = variables(text)
            .into_iter()
            .filter(|v| !known.contains(v))
            .collect();
        assert!(
            unknown.is_empty(),
            "{file} sets what serve does not read: {unknown:?}"
        );
    }
    // The nodes run the image the Dockerfile builds, on the port it exposes and its
    // health check asks, and every node is behind the balancer.
    assert!(
        compose.contains("build: ."),
        "the nodes build the Dockerfile"
    );
    assert!(dockerfile.contains("EXPOSE 8080"));
    assert!(compose.contains("SWITCHBOARD_LISTEN: 0.0.0.0:8080"));
    let nodes: Vec<&str> = compose
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.strip_suffix(':'))
        .filter(|name| name.starts_with("node-"))
        .collect();
    assert!(nodes.len() >= 2, "several nodes: {nodes:?}");
    for node in &nodes {
        assert!(
            nginx.contains(&format!("server {node}:8080")),
            "{node} behind the balancer"
        );
        assert!(
            compose.contains(&format!("SWITCHBOARD_NODE_ID: {node}")),
            "{node} named"
        );
    }
    for header in [
        "proxy_set_header Upgrade $http_upgrade",
        "proxy_http_version 1.1",
    ] {
        assert!(
            nginx.contains(header),
            "WebSockets pass the balancer: {header}"
        );
    }
    assert!(
        compose.contains("postgres://"),
        "the nodes share PostgreSQL"
    );
    assert!(compose.contains("./deploy/nginx.conf:/etc/nginx/nginx.conf"));
}
