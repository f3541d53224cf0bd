//! The `gateway` binary: parse flags, set up logging, run the server.

use clap::Parser;
use gateway::config::Config;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    gateway::run(Config::parse()).await
}
