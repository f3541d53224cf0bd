//! `LOCK` (new locks, and refreshes: a `LOCK` without a body), `UNLOCK`,
//! and how a lock is shown (`DAV:lockdiscovery`).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use volume::webdav::{DavLock, NewLock, Node};

use api_common::ApiError;
use api_common::body::read_small_body;
use api_common::if_header::IfHeader;
use file_service::{Change, ServiceError};

use super::target::{Target, href, key_of, parent_key};
use super::xml::{self, Document};
use super::{Dav, MAX_XML_BODY, xml_answer};

/// A lock's timeout when the client names none, and the longest granted.
const DEFAULT_LOCK_TIMEOUT_S: u64 = 3600;
const MAX_LOCK_TIMEOUT_S: u64 = 24 * 3600;

impl Dav<'_> {
    pub(super) async fn lock(&self, target: &Target, body: Body) -> Result<Response, ApiError> {
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let timeout_s = lock_timeout(self.headers);
        let node = self.node(target).await?;
        let key = key_of(&node, target);
        if body.iter().all(u8::is_ascii_whitespace) {
            return self.refresh(target, &node, &key, timeout_s).await;
        }
        let info = xml::parse_lockinfo(&body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let infinite = match self.headers.get("depth").map(HeaderValue::as_bytes) {
            None | Some(b"infinity") => true,
            Some(b"0") => false,
            _ => {
                return Err(ApiError::BadRequest(
                    "LOCK takes Depth 0 or infinity".into(),
                ));
            }
        };
        let Some(name) = &target.name else {
            return Err(ApiError::Forbidden(
                "the root collection cannot be locked".into(),
            ));
        };
        let created = matches!(node, Node::Missing);
        if created && !self.parent_exists(target).await? {
            return Err(ApiError::Conflict(format!(
                "the collection {name} would be in does not exist"
            )));
        }
        // The If header must hold; a new file joins its folder (whose
        // lock's token is then needed); conflicts are the grant's to find.
        let tokens = self.preconditions(target, &node).await?;
        if created {
            let parent = parent_key(target);
            self.state
                .files
                .check_locks(self.owner, &tokens, &[Change::One(&parent)])
                .await?;
        }
        let holder = info.holder.clone();
        let new = NewLock {
            token: new_lock_token(),
            root: key.clone(),
            infinite,
            exclusive: info.exclusive,
            holder: info.holder,
            timeout_s,
        };
        let creates = created.then_some(name);
        let Some(lock) = self
            .state
            .files
            .lock(self.caller, new, creates, &tokens)
            .await?
        else {
            return Err(ServiceError::Locked(key).into());
        };
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok(lock_answer(status, &lock, &holder))
    }

    /// `LOCK` without a body: give the lock the `If` header names a new
    /// timeout (it must cover this resource).
    async fn refresh(
        &self,
        target: &Target,
        node: &Node,
        key: &str,
        timeout_s: u64,
    ) -> Result<Response, ApiError> {
        if matches!(node, Node::Missing) {
            return Err(ApiError::NotFound(target.shown()));
        }
        let condition = IfHeader::from_headers(self.headers)
            .map_err(ApiError::BadRequest)?
            .ok_or_else(|| {
                ApiError::BadRequest("a LOCK refresh names its lock in an If header".into())
            })?;
        let locks = self.state.files.locks(self.owner).await?;
        let lock = locks.iter().find(|lock| {
            lock.covers(key)
                && condition
                    .submitted_tokens()
                    .any(|token| token == lock.token)
        });
        let Some(lock) = lock else {
            return Err(ApiError::PreconditionFailed(
                "the If header names no lock on this resource".into(),
            ));
        };
        let refreshed = self
            .state
            .files
            .refresh_lock(self.owner, &lock.token, timeout_s)
            .await?
            .ok_or_else(|| ApiError::PreconditionFailed("the lock expired".into()))?;
        let holders = self.state.files.lock_holders(self.owner).await?;
        let holder = holders.get(&refreshed.token).map_or("", String::as_str);
        Ok(lock_answer(StatusCode::OK, &refreshed, holder))
    }

    pub(super) async fn unlock(&self, target: &Target) -> Result<Response, ApiError> {
        let token = self
            .headers
            .get("lock-token")
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().trim_start_matches('<').trim_end_matches('>'))
            .ok_or_else(|| ApiError::BadRequest("UNLOCK needs a Lock-Token header".into()))?;
        let node = self.node(target).await?;
        let key = key_of(&node, target);
        let covers = self
            .state
            .files
            .locks(self.owner)
            .await?
            .iter()
            .any(|lock| lock.token == token && lock.covers(&key));
        if !covers {
            return Err(ApiError::Conflict(
                "no lock with that token covers this resource".into(),
            ));
        }
        self.state.files.unlock(self.owner, token).await?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
}

/// A new lock token: 128 random bits as a URN, `urn:wst:` and 22
/// base64url characters. Shorter than a `urn:uuid:` on purpose: with our
/// 66-character ETags, clients that build an `If` header in a fixed buffer
/// (litmus's is 200 bytes) cut a longer token's header short.
fn new_lock_token() -> String {
    let bytes: [u8; 16] = rand::random();
    format!("urn:wst:{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// The timeout a `LOCK` asks for (`Timeout: Second-N` or `Infinite`, the
/// first one understood), within [`MAX_LOCK_TIMEOUT_S`].
fn lock_timeout(headers: &HeaderMap) -> u64 {
    let asked = headers
        .get("timeout")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value.split(',').map(str::trim).find_map(|choice| {
                if choice.eq_ignore_ascii_case("infinite") {
                    Some(MAX_LOCK_TIMEOUT_S)
                } else {
                    choice.strip_prefix("Second-")?.parse::<u64>().ok()
                }
            })
        });
    asked
        .unwrap_or(DEFAULT_LOCK_TIMEOUT_S)
        .clamp(1, MAX_LOCK_TIMEOUT_S)
}

fn lock_answer(status: StatusCode, lock: &DavLock, holder: &str) -> Response {
    let mut document = Document::new("prop");
    document.open("lockdiscovery");
    active_lock(&mut document, lock, holder);
    document.close("lockdiscovery");
    let mut response = xml_answer(status, document.finish("prop"));
    if let Ok(token) = HeaderValue::from_str(&format!("<{}>", lock.token)) {
        response.headers_mut().insert("lock-token", token);
    }
    response
}

/// A lock as lock discovery shows it; `holder` is its `DAV:owner` fragment.
pub(super) fn active_lock(document: &mut Document, lock: &DavLock, holder: &str) {
    document.open("activelock");
    document.open("locktype").empty("write").close("locktype");
    document
        .open("lockscope")
        .empty(if lock.exclusive {
            "exclusive"
        } else {
            "shared"
        })
        .close("lockscope");
    document.leaf("depth", if lock.infinite { "infinity" } else { "0" });
    if !holder.is_empty() {
        document.open("owner").fragment(holder).close("owner");
    }
    document.leaf("timeout", &format!("Second-{}", lock.timeout_s));
    document
        .open("locktoken")
        .leaf("href", &lock.token)
        .close("locktoken");
    document
        .open("lockroot")
        .leaf("href", &href(&lock.root))
        .close("lockroot");
    document.close("activelock");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_timeouts_and_tokens() {
        let timeout = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("timeout", HeaderValue::from_str(value).expect("header"));
            lock_timeout(&headers)
        };
        assert_eq!(timeout("Second-3600"), 3600);
        assert_eq!(timeout("Infinite, Second-4100000000"), MAX_LOCK_TIMEOUT_S);
        assert_eq!(timeout("Second-99999999"), MAX_LOCK_TIMEOUT_S);
        assert_eq!(timeout("Second-0"), 1);
        assert_eq!(timeout("junk"), DEFAULT_LOCK_TIMEOUT_S);
        assert_eq!(lock_timeout(&HeaderMap::new()), DEFAULT_LOCK_TIMEOUT_S);
        let token = new_lock_token();
        assert_eq!(token.len(), "urn:wst:".len() + 22);
        assert_ne!(token, new_lock_token());
    }
}
