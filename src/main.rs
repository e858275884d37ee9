//! The `switchboard` binary: parse the command line, set up logging, call the library.

use std::process::ExitCode;

use clap::Parser;
use switchboard::config::{Cli, Command, MigrateDbArgs};
use switchboard::server::{Server, ServerConfig};

/// mimalloc rather than the system allocator: requests allocate on one thread and free
/// on another (a staged message is built by a handler and dropped by the writer), and
/// glibc's arenas made that a tenth of the server's CPU under load. The library leaves
/// the choice to whoever embeds it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Openapi => match switchboard::server::openapi_document().to_pretty_json() {
            Ok(json) => {
                // A reader that stops early (`| head`) closes the pipe: that ends the
                // output, it is not an error.
                use std::io::Write;
                match writeln!(std::io::stdout(), "{json}") {
                    Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
                        eprintln!("error: cannot write the OpenAPI document: {err}");
                        ExitCode::FAILURE
                    }
                    _ => ExitCode::SUCCESS,
                }
            }
            Err(err) => {
                eprintln!("error: cannot render the OpenAPI document: {err}");
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
                    eprintln!("unhealthy: {err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Agent(args) => switchboard::cli::run_agent(args).await,
        Command::Admin(args) => switchboard::cli::run_admin(args).await,
        Command::Mcp(args) => switchboard::cli::run_mcp(args).await,
        Command::MigrateDb(args) => migrate_db(args).await,
        Command::Serve(args) => {
            let config = match ServerConfig::try_from(&args) {
                Ok(config) => config,
                Err(err) => {
                    // As clap says a flag's value is wrong: before anything starts.
                    eprintln!("error: invalid value for '--node-id': {err}");
                    return ExitCode::from(2);
                }
            };
            switchboard::telemetry::init(args.log_format);
            let server = match Server::start(config).await {
                Ok(server) => server,
                Err(err) => {
                    eprintln!("error: {err}");
                    return ExitCode::FAILURE;
                }
            };
            if let Some(token) = server.generated_admin_token() {
                println!(
                    "\nNo admin token was configured, so one was generated. It is shown only this once;\n\
                     only its digest is stored. Keep it to create teams:\n\n    {token}\n"
                );
            }
            let stop = server.stop_token();
            tokio::spawn(async move {
                shutdown_signal().await;
                tracing::info!("shutdown requested; finishing in-flight work");
                stop.cancel();
            });
            server.wait().await;
            ExitCode::SUCCESS
        }
    }
}

/// Runs the copy; exit code 0 when every table was copied and verified, 1 otherwise
/// (the target is then left as it was).
async fn migrate_db(args: MigrateDbArgs) -> ExitCode {
    if !switchboard::store::postgres::is_url(&args.to) {
        eprintln!(
            "error: --to must be a PostgreSQL URL (postgres://user@host:port/database), not {:?}",
            args.to
        );
        return ExitCode::from(2);
    }
    match switchboard::store::postgres::copy::sqlite_to_postgres(&args.from, &args.to).await {
        Ok(copied) => {
            let width = copied.iter().map(|c| c.table.len()).max().unwrap_or(0);
            for entry in &copied {
                println!("{:<width$}  {:>10} rows", entry.table, entry.rows);
            }
            let total: u64 = copied.iter().map(|c| c.rows).sum();
            println!(
                "copied {total} rows from {} into PostgreSQL; every table's count verified",
                args.from.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
