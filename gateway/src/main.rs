//! The `gateway` binary: parse flags, set up logging, then serve or run an
//! account subcommand.

use clap::Parser;
use gateway::cli::Cli;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    match cli.command {
        Some(command) => gateway::cli::run(&cli.config, command).await,
        None => gateway::run(cli.config).await,
    }
}
