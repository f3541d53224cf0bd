//! The `gateway` binary: parse flags, set up logging, then serve or run an
//! account subcommand.

use clap::Parser;
use gateway::cli::Cli;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(gateway::log_filter(
            std::env::var("RUST_LOG").ok().as_deref(),
        ))
        .init();
    let cli = Cli::parse();
    match cli.command {
        Some(command) => gateway::cli::run(&cli.config, command).await,
        None => gateway::run(cli.config).await,
    }
}
