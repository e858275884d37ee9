//! The `switchboard` binary: parse the command line, set up logging, call the library.

use std::process::ExitCode;

use clap::Parser;
use switchboard::cli::{AdminArgs, AdminCommand, print_error, print_line};
use switchboard::config::{Cli, Command, MigrateDbArgs};
use switchboard::core::auth::AdminToken;
use switchboard::server::{Server, ServerConfig, StartError};

/// mimalloc rather than the system allocator: requests allocate on one thread and free
/// on another (a staged message is built by a handler and dropped by the writer), and
/// glibc's arenas made that a tenth of the server's CPU under load. The library leaves
/// the choice to whoever embeds it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The command line, with `serve --config`'s file read into it; every problem of the
/// file printed (exit status 2) otherwise.
fn command_line() -> Result<Cli, ExitCode> {
    let args = std::env::args_os().collect();
    match switchboard::config_file::expand(args, &|var| std::env::var_os(var)) {
        Ok(args) => Ok(Cli::parse_from(args)),
        Err(err) => {
            for problem in err.problems {
                print_error(&format!("error: {problem}"));
            }
            Err(ExitCode::from(2))
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = match command_line() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Openapi => match switchboard::server::openapi_document().to_pretty_json() {
            Ok(json) => {
                print_line(&json);
                ExitCode::SUCCESS
            }
            Err(err) => {
                print_error(&format!("error: cannot render the OpenAPI document: {err}"));
                ExitCode::FAILURE
            }
        },
        Command::Healthcheck(args) => {
            match switchboard::server::healthcheck(
                args.listen,
                std::time::Duration::from_secs(args.timeout),
            )
            .await
            {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    print_error(&format!("unhealthy: {err}"));
                    ExitCode::FAILURE
                }
            }
        }
        Command::Agent(args) => switchboard::cli::run_agent(args).await,
        Command::Admin(AdminArgs {
            command: AdminCommand::ResetToken { database },
            ..
        }) => reset_token(&database).await,
        Command::Admin(args) => switchboard::cli::run_admin(args).await,
        Command::Mcp(args) => switchboard::cli::run_mcp(args).await,
        Command::Search(args) => switchboard::cli::run_search(args).await,
        Command::Apply(args) => switchboard::cli::run_apply(args).await,
        Command::MigrateDb(args) => migrate_db(args).await,
        Command::Serve(args) => {
            let config = match ServerConfig::try_from(&*args) {
                Ok(config) => config,
                Err(err) => {
                    // As clap says a flag's value is wrong: before anything starts.
                    print_error(&format!("error: invalid value for '--node-id': {err}"));
                    return ExitCode::from(2);
                }
            };
            switchboard::telemetry::init(args.log_format);
            let database = config.database.clone();
            let signals = StopSignals::listen();
            let server = match Server::start(config).await {
                Ok(server) => server,
                Err(err) => {
                    print_error(&format!("error: {err}"));
                    return if err.is_usage() {
                        ExitCode::from(2)
                    } else {
                        ExitCode::FAILURE
                    };
                }
            };
            announce_urls(&server);
            announce_admin_token(server.admin_token(), &database);
            let stop = server.stop_token();
            tokio::spawn(async move {
                signals.recv().await;
                tracing::info!("shutdown requested; finishing in-flight work");
                stop.cancel();
            });
            server.wait().await;
            ExitCode::SUCCESS
        }
    }
}

/// Where everything is, once, for the person who just started the server: the log line
/// names the address, but a newcomer looks for the console and the docs.
fn announce_urls(server: &Server) {
    let base = server.base_url();
    let ws = base.replacen("http://", "ws://", 1);
    let mut lines = vec![
        format!("  Console     {base}/console"),
        format!("  API docs    {base}/docs   (OpenAPI: {base}/openapi.json)"),
        format!("  REST        {base}/v1/…"),
        format!("  WebSocket   {ws}/v1/ws"),
        format!("  MCP         {base}/mcp"),
        format!("  A2A         {base}/a2a/{{team_id}}/agents"),
    ];
    if let Some(stomp) = server.stomp_addr() {
        lines.push(format!("  STOMP       {stomp}"));
    }
    lines.push(format!(
        "  Metrics     {base}/metrics   Health: {base}/healthz"
    ));
    print_line(&format!("Switchboard is running:\n{}", lines.join("\n")));
}

/// Tells the operator which admin token is in force, so that nobody is left without one
/// and without a clue: a generated one is shown (once: only its digest is stored); a
/// kept one is named by the day it was set, with the way to replace it.
fn announce_admin_token(token: &AdminToken, database: &std::path::Path) {
    match token {
        AdminToken::Configured => {}
        AdminToken::Replaced { was_set_at } => {
            let when = was_set_at.map_or_else(
                || "at an earlier start".to_owned(),
                |at| format!("on {}", &at.to_string()[..10]),
            );
            tracing::warn!(
                "the admin token given by --admin-token or SWITCHBOARD_ADMIN_TOKEN replaces \
                 the one stored in {} (set {when}): the old one is refused from now on",
                database.display()
            );
        }
        AdminToken::Generated(token) => print_line(&format!(
            "\nNo admin token was configured, so one was generated. It is shown only this once;\n\
             only its digest is stored. Keep it to create teams:\n\n    {token}\n"
        )),
        AdminToken::Stored { set_at } => {
            let when = set_at.map_or_else(
                || "at an earlier start".to_owned(),
                |at| format!("on {}", &at.to_string()[..10]),
            );
            print_line(&format!(
                "The admin token was set {when} (only its digest is stored). Lost it? Stop the \
                 server and run: switchboard admin reset-token --database {}",
                database.display()
            ));
        }
    }
}

/// `switchboard admin reset-token`: prints the new token; exit 2 when the database is
/// served or missing (how it was asked), 1 when storage failed.
async fn reset_token(database: &std::path::Path) -> ExitCode {
    match switchboard::server::reset_admin_token(database).await {
        Ok(token) => {
            print_line(&format!(
                "A new admin token was set on {}. It is shown only this once:\n\n    {token}\n\n\
                 (On PostgreSQL, restart every node: each keeps the token it loaded.)",
                database.display()
            ));
            ExitCode::SUCCESS
        }
        Err(err) => {
            print_error(&format!("error: {err}"));
            let usage = err.is_usage() || matches!(err, StartError::NoDatabase(_));
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

/// Runs the copy; exit code 0 when every table was copied and verified, 1 otherwise
/// (the target is then left as it was).
async fn migrate_db(args: MigrateDbArgs) -> ExitCode {
    if !switchboard::store::postgres::is_url(&args.to) {
        print_error(&format!(
            "error: --to must be a PostgreSQL URL (postgres://user@host:port/database), not {:?}",
            args.to
        ));
        return ExitCode::from(2);
    }
    match switchboard::store::postgres::copy::sqlite_to_postgres(&args.from, &args.to).await {
        Ok(copied) => {
            let width = copied.iter().map(|c| c.table.len()).max().unwrap_or(0);
            for entry in &copied {
                print_line(&format!("{:<width$}  {:>10} rows", entry.table, entry.rows));
            }
            let total: u64 = copied.iter().map(|c| c.rows).sum();
            print_line(&format!(
                "copied {total} rows from {} into PostgreSQL; every table's count verified",
                args.from.display()
            ));
            ExitCode::SUCCESS
        }
        Err(err) => {
            print_error(&format!("error: {err}"));
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C and SIGTERM, listened for from the moment this is made: registered before the
/// server says it is up, so a stop sent right after the banner stops it cleanly. (A
/// handler registered inside the task that waits for it counted only once that task first
/// ran: a SIGTERM in between took the default action and killed the process.)
struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    fn listen() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(signal) => Some(signal),
                Err(err) => {
                    tracing::error!(error = %err, "cannot listen for {name}");
                    None
                }
            };
            StopSignals {
                interrupt: listen(SignalKind::interrupt(), "Ctrl-C"),
                terminate: listen(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Resolves on the first of them.
    async fn recv(self) {
        #[cfg(unix)]
        {
            async fn one(signal: Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(mut signal) => {
                        signal.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = one(self.interrupt) => {}
                () = one(self.terminate) => {}
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
