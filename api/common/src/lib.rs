//! What every protocol adapter shares and none owns: the HTTP headers they
//! all parse (ranges, entity tags, dates, WebDAV's `If`, which the REST API
//! honours for locks too) and reading a small request body whole.
//!
//! - `headers`: `Range`, `If-None-Match`, query flags, dates, header values.
//! - `if_header`: the `If` header (RFC 4918 §10.4) and the lock tokens a
//!   request submits.
//! - `body`: a small body read whole, bounded in size and time.
//! - `answer`: a file's HTTP answer (whole, range, headers, not modified).
//! - [`ApiError`]: errors as the REST API and WebDAV answer them (JSON).
//! - [`trace_layer`]: each request's span, failures at DEBUG.

pub mod answer;
pub mod body;
mod error;
pub mod headers;
pub mod if_header;

pub use error::ApiError;

use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{DefaultOnFailure, TraceLayer};

/// Each request's span, and its failures at DEBUG: a 4xx is the client's
/// mistake and a 5xx the server's answer to load (503) or to a missing
/// feature (501); the server's own faults are logged at ERROR where they
/// happen, with their detail (`ApiError`'s internal errors, the S3 adapter's).
pub fn trace_layer() -> TraceLayer<SharedClassifier<ServerErrorsAsFailures>> {
    TraceLayer::new_for_http().on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG))
}
