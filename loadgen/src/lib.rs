//! Load generator for wasm-storage.
//!
//! Layout:
//! - [`corpus`]: files with normally distributed sizes and their manifest.
//! - [`load`]: `loadgen run`: verified uploads and downloads at a
//!   concurrency or a rate, with HDR latency percentiles.
//! - [`experiment`]: the paper's experiment, arm by arm, each against a
//!   fresh gateway process (`loadgen serve`).
//! - [`suite`]: `loadgen policy`: the workloads × concurrency × arms
//!   behind the estimator's defaults, each cell an experiment.
//! - [`oracle`]: every file's true footprint, and the best fixed threshold
//!   at a restart rate in hindsight.
//! - [`figures`]: the experiment's figures as PNG and SVG.
//! - [`memory`]: `burst` and `soak`: the gateway process's memory (peak,
//!   after a burst, after replacing every instance, over a long run).
//! - [`child`]: a gateway child process on a free loopback port, and its
//!   memory from `/proc`.
//!
//! `src/main.rs` is the `loadgen` binary.

pub mod child;
pub mod corpus;
pub mod experiment;
pub mod figures;
pub mod load;
pub mod memory;
pub mod oracle;
pub mod suite;
