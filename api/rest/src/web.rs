//! `GET /`: the web page, embedded in the binary. Plain HTML, CSS and
//! JavaScript with no build step and nothing fetched from elsewhere.
//! `GET /tus.min.js`: tus-js-client, vendored unchanged from its npm
//! package (`dist/tus.min.js`, MIT, `src/web/tus-js-client.LICENSE`): the
//! page's resumable uploads to `/uploads/`.

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::RestState;

const PAGE: &str = include_str!("web/index.html");

/// tus-js-client 4.3.1, pinned: bump the ETag with the file.
const TUS_JS_CLIENT: &str = include_str!("web/tus.min.js");
/// The script's validator: it changes only with the version.
const TUS_ETAG: &str = "\"tus-js-client-4.3.1\"";

pub(crate) fn router() -> Router<RestState> {
    Router::new()
        .route("/", get(page))
        .route("/tus.min.js", get(tus_js_client))
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

/// The vendored tus-js-client, from this origin (the page's policy sets no
/// `script-src`, so a same-origin script runs). Revalidated on each load
/// (`no-cache`) against an ETag naming the version: a new gateway never
/// runs with an old copy, and an unchanged one costs a 304.
async fn tus_js_client(request: HeaderMap) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::ETAG, TUS_ETAG),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'"),
    ];
    let fresh = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| {
            let tag = tag.trim();
            tag == TUS_ETAG || tag == "*" || tag.strip_prefix("W/") == Some(TUS_ETAG)
        });
    if fresh {
        (StatusCode::NOT_MODIFIED, headers).into_response()
    } else {
        (headers, TUS_JS_CLIENT).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_client_is_the_pinned_version() {
        // The UMD bundle defines `window.tus`.
        assert!(TUS_JS_CLIENT.contains(".tus=t()"));
        assert!(PAGE.contains("<script src=\"/tus.min.js\"></script>"));
    }
}
