//! What every protocol adapter shares and none owns: the HTTP headers they
//! all parse (ranges, entity tags, dates, WebDAV's `If`, which the REST API
//! honours for locks too) and reading a small request body whole.
//!
//! - `headers`: `Range`, `If-None-Match`, query flags, dates, header values.
//! - `if_header`: the `If` header (RFC 4918 §10.4) and the lock tokens a
//!   request submits.
//! - `body`: a small body read whole, bounded in size and time.
//! - `answer`: a file's HTTP answer (whole, range, headers, not modified).

pub(crate) mod answer;
pub(crate) mod body;
pub(crate) mod headers;
pub(crate) mod if_header;
