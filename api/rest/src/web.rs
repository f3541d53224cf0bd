//! `GET /`: the web page, embedded in the binary. Plain HTML, CSS and
//! JavaScript with no build step and nothing fetched from elsewhere.
//! `GET /tus.min.js`: tus-js-client, vendored unchanged from its npm
//! package (`dist/tus.min.js`, MIT, `src/web/tus-js-client.LICENSE`): the
//! page's resumable uploads to `/uploads/`.
//! `GET /history.js`: the page's trash and file history (issue 32), a
//! script of its own so the page does not grow without end.

use std::sync::LazyLock;

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

/// The page's trash and history script.
const HISTORY_JS: &str = include_str!("web/history.js");
/// Its validator: a hash of the text, so it changes with every edit (the
/// script has no version of its own to name).
static HISTORY_ETAG: LazyLock<String> =
    LazyLock::new(|| format!("\"history-{:016x}\"", fnv1a(HISTORY_JS.as_bytes())));

pub(crate) fn router() -> Router<RestState> {
    Router::new()
        .route("/", get(page))
        .route("/tus.min.js", get(tus_js_client))
        .route("/history.js", get(history_js))
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
    script(&request, TUS_ETAG, TUS_JS_CLIENT)
}

/// The trash and history script, served as the tus client is.
async fn history_js(request: HeaderMap) -> Response {
    script(&request, &HISTORY_ETAG, HISTORY_JS)
}

/// A script of the page with its validator: 304 when the client's copy is
/// this one.
fn script(request: &HeaderMap, etag: &str, body: &'static str) -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
        (header::CACHE_CONTROL, "no-cache"),
        (header::ETAG, etag),
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
            tag == etag || tag == "*" || tag.strip_prefix("W/") == Some(etag)
        });
    if fresh {
        (StatusCode::NOT_MODIFIED, headers).into_response()
    } else {
        (headers, body).into_response()
    }
}

/// FNV-1a, 64 bits: enough to tell two versions of one script apart.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_client_is_the_pinned_version() {
        // The UMD bundle defines `window.tus`.
        assert!(TUS_JS_CLIENT.contains(".tus=t()"));
        assert!(PAGE.contains("<script src=\"/tus.min.js\"></script>"));
    }

    #[test]
    fn the_page_loads_its_history_script_after_its_own() {
        // history.js uses the page script's helpers as it runs.
        let own = PAGE.find("start();\n</script>").unwrap();
        let history = PAGE.find("<script src=\"/history.js\"></script>").unwrap();
        assert!(own < history);
        for id in ["trash-open", "trash-more", "trash-empty", "history-dialog"] {
            assert!(PAGE.contains(&format!("id=\"{id}\"")), "{id}");
            assert!(HISTORY_JS.contains(&format!("$(\"{id}\")")), "{id}");
        }
    }

    #[test]
    fn the_history_script_revalidates_by_its_etag() {
        let first = script(&HeaderMap::new(), &HISTORY_ETAG, HISTORY_JS);
        assert_eq!(first.status(), StatusCode::OK);
        let etag = first.headers()[header::ETAG].clone();
        assert!(etag.to_str().unwrap().starts_with("\"history-"));
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let second = script(&again, &HISTORY_ETAG, HISTORY_JS);
        assert_eq!(second.status(), StatusCode::NOT_MODIFIED);
    }
}
