//! Hostile and malformed requests, sent as raw bytes over TCP so that
//! nothing on the way fixes them: each gets the status a careful server
//! gives (hyper's own where the request never reaches the application),
//! and none of them stores, replaces or deletes a file, leaves a blob or a
//! temp file behind, or changes a setting.
//!
//! One test per area, each on a gateway of its own, so one area's failure
//! hides none of the others' and no test depends on another's effects.
//! Each runs in two phases (see [`support::Area::check`]): open (no user
//! yet), then with users, where the same cases run again authenticated,
//! followed by the area's cases about accounts; then it checks that
//! nothing was written. One test binary, because each links the whole
//! gateway.
//!
//! Layout: a new case goes in the module of what it attacks; a new area is
//! a module here with one `Area` test.
//! - `support`: raw requests, reading and judging answers, the gateway and
//!   its two phases, the nothing-written checks.
//! - `paths`: request targets and the file paths the files API refuses.
//! - `methods`: methods a route lacks, or that are no method.
//! - `request_head`: the request line and header syntax (RFC 9112).
//! - `request_body`: Content-Length, chunked coding, smuggling, bodies too
//!   large, cut off or too slow.
//! - `files`: listing parameters, Range, If-None-Match.
//! - `share`: share links, made and used.
//! - `admin`: the admin API's settings and rights.
//! - `auth`: credentials, sessions and CSRF, sign-in.
//! - `accounts`: other users' trees, the quota.

#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;
mod support;

mod accounts;
mod admin;
mod auth;
mod files;
mod methods;
mod paths;
mod request_body;
mod request_head;
mod share;
