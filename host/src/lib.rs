//! The Wasm host: everything between a request's bytes and a storage
//! instance, and nothing of any protocol.
//!
//! - [`budget`]: the memory budget: pool memory plus reservations.
//! - [`runtime`]: the wasmtime engine, the component's bindings, typed
//!   calls, the memory limiter and the host side of the `volume` and `body`
//!   interfaces (the guest is built by `build.rs` and embedded).
//! - [`pool`]: the instance pool: lifecycle and drain-and-replace, dispatch
//!   policy, admission by bytes and the wait queue, leases.
//! - [`recycler`]: the embedded estimator task: samples, modes, threshold.
//! - [`procstat`]: process RSS and private-dirty bytes from `/proc/self`.

pub mod budget;
pub mod pool;
pub mod procstat;
pub mod recycler;
pub mod runtime;
