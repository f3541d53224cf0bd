//! What can go wrong in deciding who is asking: no or wrong credentials,
//! too many attempts, no right. Rendered by each adapter in its dialect;
//! this crate renders it only as the rejection of its own extractors (the
//! JSON `{error, message}` of the REST API and WebDAV).

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// No credentials, or wrong ones; `basic` adds a Basic challenge (left
    /// out for a page's `fetch`, or browsers would pop up a login box).
    #[error("sign in: this needs credentials (a token, a name and password, or a session)")]
    Unauthorized { basic: bool },
    #[error("{0}")]
    Forbidden(String),
    #[error("a request signed in by a session cookie needs the session's X-CSRF-Token header")]
    Csrf,
    #[error("too many failed sign-in attempts from this address; try again in {retry_after} s")]
    TooManyAttempts { retry_after: u64 },
    /// Every password-hashing slot stayed busy.
    #[error("{0}")]
    Unavailable(String),
    /// The accounts could not be read; the detail is logged, not sent.
    #[error("internal error")]
    Internal(String),
}

impl AuthError {
    /// 401 for a request with these headers: with a Basic challenge unless
    /// it is a page's `fetch` (`Sec-Fetch-Mode` other than `navigate`).
    pub fn unauthorized(headers: &HeaderMap) -> Self {
        let from_a_page = headers
            .get("sec-fetch-mode")
            .is_some_and(|mode| mode != "navigate");
        Self::Unauthorized {
            basic: !from_a_page,
        }
    }

    /// The status and the short code of the JSON rendering.
    pub fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Unauthorized { .. } => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            Self::Csrf => (StatusCode::FORBIDDEN, "csrf"),
            Self::TooManyAttempts { .. } => (StatusCode::TOO_MANY_REQUESTS, "too_many_attempts"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The headers the answer must carry: the challenges of a 401, when to
    /// try again after a 429 or a 503.
    pub fn add_headers(&self, headers: &mut HeaderMap) {
        match self {
            Self::Unauthorized { basic } => {
                headers.append(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"wasm-storage\""),
                );
                if *basic {
                    headers.append(
                        header::WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"wasm-storage\", charset=\"UTF-8\""),
                    );
                }
            }
            Self::TooManyAttempts { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            Self::Unavailable(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(1u32));
            }
            _ => {}
        }
    }
}

impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if let Self::Internal(detail) = &self {
            tracing::error!(%detail, "internal error");
        }
        let body = serde_json::json!({ "error": code, "message": self.to_string() });
        let mut response = (status, Json(body)).into_response();
        self.add_headers(response.headers_mut());
        response
    }
}
