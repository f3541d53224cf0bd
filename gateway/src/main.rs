//! The `gateway` binary: parse flags, set up logging, then serve or run an
//! account subcommand.

use clap::Parser;
use gateway::cli::Cli;

/// mimalloc, not glibc's malloc: a small S3 PUT spent about a tenth of
/// the gateway's CPU in glibc's `malloc`/`free`, and mimalloc served
/// 1.21x the S3 PUTs of 4 KiB. Without transparent huge pages (`no_thp`)
/// its memory matches glibc's in `loadgen burst` (`docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
