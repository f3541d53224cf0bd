//! `/auth/...`: the web page's sign-in (a session cookie, `HttpOnly`,
//! `SameSite=Strict`, `Secure` behind TLS), sign-out, and who is signed in.

use axum::body::Body;
use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::RestState;
use api_common::ApiError;
use auth::{self, Caller, SESSION_COOKIE, SESSION_LIFETIME, Via, secrets};

/// The session's CSRF token is in the answer: no cache may keep it.
const NO_STORE: [(header::HeaderName, &str); 1] = [(header::CACHE_CONTROL, "no-store")];

/// A sign-in body is a name and a password: anything larger is refused.
const MAX_SIGN_IN_BODY: usize = 4096;

pub(crate) fn router() -> Router<RestState> {
    Router::new()
        .route("/auth/login", post(login))
        .route("/auth/logout", post(logout))
        .route("/auth/session", get(session))
}

#[derive(Debug, Deserialize)]
struct SignIn {
    name: String,
    password: String,
}

/// What the page learns about who is signed in.
#[derive(Debug, Serialize)]
struct SessionView {
    open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    admin: Option<bool>,
    /// For a session: what state-changing requests send as `X-CSRF-Token`
    /// (`null` for a token or a password, which need none).
    csrf: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    used: Option<u64>,
    /// `null`: no quota.
    quota: Option<u64>,
    /// Whether people's folders keep versions and a trash (`--versions`):
    /// what the page's delete confirmation says.
    versions: bool,
}

/// `POST /auth/login` with JSON or a form of `name` and `password`: a new
/// session. Refused from another site's page (`Origin` must be this host).
async fn login(
    State(state): State<RestState>,
    parts: Parts,
    body: Body,
) -> Result<Response, ApiError> {
    if auth::from_another_site(&parts.headers) {
        return Err(ApiError::Forbidden(
            "a sign-in must come from this site's own page".into(),
        ));
    }
    let body = api_common::body::read_small_body(body, MAX_SIGN_IN_BODY).await?;
    let json = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    let sign_in: SignIn = if json {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::BadRequest(format!("invalid sign-in: {e}")))?
    } else {
        parse_form(&body)?
    };
    let user = state
        .auth
        .sign_in(
            state.auth.client_address(&parts),
            &sign_in.name,
            &sign_in.password,
        )
        .await?;
    let cookie = secrets::random_secret();
    let csrf = secrets::random_secret();
    let expires_ms = volume::now_ms()
        .saturating_add(i64::try_from(SESSION_LIFETIME.as_millis()).unwrap_or(i64::MAX));
    state
        .auth
        .accounts()
        .add_session(user.id, &secrets::secret_hash(&cookie), &csrf, expires_ms)
        .await
        .map_err(|error| ApiError::from_volume(error, "the session"))?;
    let secure = if behind_tls(&parts.headers) {
        "; Secure"
    } else {
        ""
    };
    let set_cookie = format!(
        "{SESSION_COOKIE}={cookie}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        SESSION_LIFETIME.as_secs()
    );
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(&set_cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let view = SessionView {
        open: false,
        name: Some(user.name),
        admin: Some(user.admin),
        csrf: Some(csrf),
        used: None,
        quota: user.quota,
        versions: state.files.keeps_versions(),
    };
    Ok((headers, Json(view)).into_response())
}

fn parse_form(body: &[u8]) -> Result<SignIn, ApiError> {
    serde_urlencoded::from_bytes(body)
        .map_err(|e| ApiError::BadRequest(format!("invalid sign-in: {e}")))
}

/// `POST /auth/logout`: end this session (and clear its cookie).
async fn logout(
    State(state): State<RestState>,
    caller: Caller,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Caller::User {
        via: Via::Session { .. },
        ..
    } = caller
        && let Some(cookie) = auth::session_cookie(&headers)
    {
        state
            .auth
            .accounts()
            .remove_session(&secrets::secret_hash(cookie))
            .await
            .map_err(|error| ApiError::from_volume(error, "the session"))?;
    }
    let clear = format!("{SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(value) = HeaderValue::from_str(&clear) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `GET /auth/session`: who is signed in (`{"open": true}` on an open
/// gateway), with the CSRF token of a session and the quota in use.
async fn session(
    State(state): State<RestState>,
    caller: Caller,
) -> Result<([(header::HeaderName, &'static str); 1], Json<SessionView>), ApiError> {
    let Caller::User { user, via } = caller else {
        return Ok((
            NO_STORE,
            Json(SessionView {
                open: true,
                name: None,
                admin: None,
                csrf: None,
                used: None,
                quota: None,
                versions: state.files.keeps_versions(),
            }),
        ));
    };
    let used = state
        .auth
        .accounts()
        .usage(user.owner())
        .await
        .map_err(|error| ApiError::from_volume(error, "the usage"))?;
    Ok((
        NO_STORE,
        Json(SessionView {
            open: false,
            name: Some(user.name),
            admin: Some(user.admin),
            csrf: match via {
                Via::Session { csrf } => Some(csrf),
                Via::Token | Via::Password => None,
            },
            used: Some(used),
            quota: user.quota,
            versions: state.files.keeps_versions(),
        }),
    ))
}

/// The proxy in front says the client spoke HTTPS.
pub(crate) fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
}
