//! `GET /`: the web page, embedded in the binary. Plain HTML, CSS and
//! JavaScript with no build step and nothing fetched from elsewhere.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::AppState;

const PAGE: &str = include_str!("../web/index.html");

pub(crate) fn router() -> Router<AppState> {
    Router::new().route("/", get(page))
}

/// The page, never framed by another site (clickjacking: a frame could
/// trick a signed-in user, or anyone on an open gateway, into clicking
/// "delete"). Both headers, for browsers that know only the older one.
async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
            (header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        PAGE,
    )
}
