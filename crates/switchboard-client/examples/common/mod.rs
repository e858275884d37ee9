//! What the examples share: their command line and the team they set up over REST
//! with the admin token (the agents then talk through `switchboard_client`).

use serde_json::{Value, json};

/// `--url` (or `SWITCHBOARD_URL`), `--admin-token` (or `SWITCHBOARD_ADMIN_TOKEN`) and
/// `--rounds`.
pub struct Options {
    pub url: String,
    pub admin_token: String,
    pub rounds: u32,
}

pub fn options() -> Result<Options, String> {
    let mut url =
        std::env::var("SWITCHBOARD_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let mut admin_token = std::env::var("SWITCHBOARD_ADMIN_TOKEN").ok();
    let mut rounds = 3;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--url" => url = value()?,
            "--admin-token" => admin_token = Some(value()?),
            "--rounds" => rounds = value()?.parse().map_err(|_| "--rounds is a number")?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(Options {
        url,
        admin_token: admin_token.ok_or("give --admin-token (or SWITCHBOARD_ADMIN_TOKEN)")?,
        rounds,
    })
}

/// The process's exit code for `result` (the error printed).
pub fn exit(result: Result<(), String>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Creates team `team_id` and registers `agents` (registration bodies) with its key;
/// returns their tokens, in order.
pub async fn team(opts: &Options, team_id: &str, agents: &[Value]) -> Result<Vec<String>, String> {
    switchboard_client::ensure_tls_provider();
    let http = reqwest::Client::new();
    let post = |path: String, token: String, body: Value| {
        let req = http
            .post(format!("{}{path}", opts.url))
            .bearer_auth(token)
            .json(&body);
        async move {
            let res = req.send().await.map_err(|e| e.to_string())?;
            let status = res.status();
            let body: Value = res.json().await.map_err(|e| e.to_string())?;
            if status.is_success() {
                Ok(body)
            } else {
                Err(format!("{status}: {body}"))
            }
        }
    };
    let team = post(
        "/v1/teams".into(),
        opts.admin_token.clone(),
        json!({"name": team_id, "team_id": team_id}),
    )
    .await?;
    let key = team["team_key"].as_str().unwrap_or_default().to_owned();
    let mut tokens = Vec::new();
    for agent in agents {
        let registered = post(
            format!("/v1/teams/{team_id}/agents"),
            key.clone(),
            agent.clone(),
        )
        .await?;
        tokens.push(registered["token"].as_str().unwrap_or_default().to_owned());
    }
    Ok(tokens)
}
