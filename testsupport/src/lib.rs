//! Real servers for integration tests.
//!
//! Starts a throwaway PostgreSQL cluster ([`Postgres`]) or SeaweedFS S3
//! endpoint ([`Seaweed`]) on loopback ports picked at run time, each with its
//! files in a temporary directory. Dropping the handle stops the server by
//! PID (graceful signal, then `SIGKILL`) and removes its files.
//!
//! Everything is synchronous, so it works from plain and `#[tokio::test]`
//! tests alike. Linux only (uses `/proc`, `kill` and `curl`).
//!
//! Needs Debian's `postgresql` package for [`Postgres`], and SeaweedFS's
//! `weed` plus `curl` for [`Seaweed`]: `scripts/install-test-deps.sh`
//! installs them all. [`find_tool`] finds `weed` (and any other tool) in
//! `$WASM_STORAGE_TOOLS`, the workspace's `.tools/venv/bin`, or `PATH`.

mod child;
mod port;
mod postgres;
mod room;
mod seaweed;
mod tool;

pub use child::{ChildGuard, process_group_members};
pub use port::{free_port, free_port_with_grpc};
pub use postgres::Postgres;
pub use room::{disk_space, roomy_temp_dir};
pub use seaweed::Seaweed;
pub use tool::{TOOLS_ENV, find_tool};
