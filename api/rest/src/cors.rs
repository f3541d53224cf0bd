//! CORS for the data routes (`/files/`, `/uploads/`), off unless the
//! operator names the origins allowed (`--cors-origins`): a web app on one
//! of them may read and write files and run tus uploads (Uppy,
//! tus-js-client) with a token in `Authorization`. Never with cookies: the
//! page's session stays the page's own origin's.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, Method, header};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

/// What an answer shows a script on another origin: the tus protocol's
/// headers, and what a download needs.
const EXPOSED: &[&str] = &[
    "location",
    "upload-offset",
    "upload-length",
    "upload-metadata",
    "upload-expires",
    "upload-defer-length",
    "upload-concat",
    "tus-resumable",
    "tus-version",
    "tus-extension",
    "tus-max-size",
    "tus-checksum-algorithm",
    "etag",
    "content-length",
    "content-range",
    "content-disposition",
    "accept-ranges",
    "last-modified",
];

/// The layer for `origins` (`*`: any origin); `None` when none is named.
pub(crate) fn layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow = if origins.iter().any(|origin| origin == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|origin| HeaderValue::from_str(origin.trim_end_matches('/')).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow)
            .allow_methods([
                Method::GET,
                Method::HEAD,
                Method::PUT,
                Method::POST,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers(
                EXPOSED
                    .iter()
                    .map(|name| HeaderName::from_static(name))
                    .collect::<Vec<_>>(),
            )
            .max_age(Duration::from_secs(3600))
            .vary([
                header::ORIGIN,
                header::ACCESS_CONTROL_REQUEST_METHOD,
                header::ACCESS_CONTROL_REQUEST_HEADERS,
            ]),
    )
}
