//! What a browser says of where a request comes from (`Sec-Fetch-Site`,
//! `Origin`, `Host`), and which credentials it never adds by itself: what
//! the checks against other sites' pages and DNS rebinding read.

use std::net::IpAddr;

use axum::http::{HeaderMap, header};

/// Whether a browser says the request comes from another site's page:
/// `Sec-Fetch-Site` when it sends one, else an `Origin` naming another
/// host than `Host`. Clients that are not browsers send neither.
pub fn from_another_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        return site != "same-origin" && site != "none";
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let origin_host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .trim_end_matches('/');
    host.is_empty() || !origin_host.eq_ignore_ascii_case(host)
}

/// Whether a request carries `Authorization: Bearer …`, which a browser
/// never adds by itself.
pub(crate) fn bears_a_token(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.get(..7))
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "))
}

/// Whether the `Host` names this machine: `localhost` or a loopback
/// address (a request without one, HTTP/1.0, is not from a browser).
pub fn addressed_to_loopback(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    let name = name.trim_end_matches('.');
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
