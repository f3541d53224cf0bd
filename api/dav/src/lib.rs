//! `/dav/`: WebDAV classes 1 and 2 (RFC 4918) over the same trees as
//! `/files/`, so the store mounts as a drive: an adapter of the file
//! service, like the REST API.
//!
//! `/dav/{path}` is `/files/{path}` of the same caller: a file is a
//! resource, a folder (made on purpose, or holding files) a collection,
//! `/dav/` the caller's root. `GET`, `HEAD`, `PUT` and `DELETE` of files
//! are the service's reads and stores (hashed on upload, verified on
//! download, the same limits and memory budget). `PROPFIND` (depth 0 and
//! 1; infinity is refused) streams its multistatus as it reads the listing;
//! `PROPPATCH` keeps dead properties (counted in the quota); `MKCOL`,
//! `COPY` and `MOVE` change rows, not bytes; `LOCK` and `UNLOCK` keep locks
//! in the database, so they hold across gateways and for every protocol.
//!
//! - `target`: a URL → the resource it names, its key and href.
//! - `content`: `GET`, `HEAD`, `PUT`, `DELETE`, `MKCOL`.
//! - `properties`: `PROPFIND` (streamed) and `PROPPATCH`, live properties.
//! - `transfer`: `COPY` and `MOVE`.
//! - `locking`: `LOCK`, refresh and `UNLOCK`.
//! - `xml`: request bodies in, multistatus answers out (quick-xml).

mod content;
mod locking;
mod properties;
mod target;
mod transfer;
mod xml;

use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRef, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;

use volume::Owner;
use volume::webdav::{DavLock, Node};

use api_common::ApiError;
use api_common::if_header::{IfHeader, ResourceState};
use auth::{Authenticator, Caller};
use file_service::{FileService, LockTokens, ServiceError};

use self::target::{Target, href, key_of};
use self::xml::Document;

/// The largest XML body accepted (`PROPFIND`, `PROPPATCH`, `LOCK`).
const MAX_XML_BODY: usize = 256 * 1024;

/// The most resources an `If` header may name by tag (each is looked up).
const MAX_IF_TAGS: usize = 16;

const ALLOW: &str =
    "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, PROPPATCH, COPY, MOVE, LOCK, UNLOCK";

/// What WebDAV reads: the file service, and the authenticator (callers).
#[derive(Debug, Clone)]
pub struct DavState {
    pub files: FileService,
    pub auth: Arc<Authenticator>,
}

impl FromRef<DavState> for Arc<Authenticator> {
    fn from_ref(state: &DavState) -> Self {
        state.auth.clone()
    }
}

/// `/dav` and everything under it.
pub fn router(state: DavState) -> Router {
    routes().with_state(state)
}

fn routes() -> Router<DavState> {
    Router::new()
        .route("/dav", any(handle))
        .route("/dav/", any(handle))
        .route("/dav/{*path}", any(handle))
}

async fn handle(State(state): State<DavState>, caller: Caller, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let dav = Dav {
        state: &state,
        caller: &caller,
        owner: caller.owner(),
        headers: &parts.headers,
    };
    let answer = match Target::from_uri(&parts.uri) {
        Err(error) => Err(error),
        Ok(target) => match parts.method.as_str() {
            "OPTIONS" => Ok(options()),
            "GET" => dav.get(&target, Read::Content).await,
            "HEAD" => dav.get(&target, Read::Headers).await,
            "PUT" => dav.put(&target, body).await,
            "DELETE" => dav.delete(&target).await,
            "MKCOL" => dav.mkcol(&target, body).await,
            "PROPFIND" => dav.propfind(&target, body).await,
            "PROPPATCH" => dav.proppatch(&target, body).await,
            "COPY" => dav.transfer(&target, Verb::Copy).await,
            "MOVE" => dav.transfer(&target, Verb::Move).await,
            "LOCK" => dav.lock(&target, body).await,
            "UNLOCK" => dav.unlock(&target).await,
            other => Err(ApiError::MethodNotAllowed(format!(
                "{other} is not a WebDAV method this server knows"
            ))),
        },
    };
    let mut response = match answer {
        Ok(response) => response,
        // RFC 4918 §16: say which lock's token was missing.
        Err(ApiError::Service(ServiceError::Locked(root))) => lock_token_needed(&href(&root)),
        Err(error) => error.into_response(),
    };
    if response.status() == StatusCode::METHOD_NOT_ALLOWED {
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    }
    response
}

fn options() -> Response {
    let mut headers = HeaderMap::new();
    headers.insert("dav", HeaderValue::from_static("1, 2"));
    headers.insert(header::ALLOW, HeaderValue::from_static(ALLOW));
    // Windows' WebDAV client looks for this before it will write.
    headers.insert("ms-author-via", HeaderValue::from_static("DAV"));
    (StatusCode::OK, headers).into_response()
}

/// How a resource is asked for: `GET` (the content) or `HEAD` (headers only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Read {
    Content,
    Headers,
}

/// `COPY` or `MOVE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Copy,
    Move,
}

/// One request's view: who asks, in which tree, with which headers.
struct Dav<'a> {
    state: &'a DavState,
    caller: &'a Caller,
    owner: Owner,
    headers: &'a HeaderMap,
}

impl Dav<'_> {
    async fn node(&self, target: &Target) -> Result<Node, ApiError> {
        self.state
            .files
            .node(self.owner, target.name.as_ref())
            .await
            .map_err(|error| match error {
                ServiceError::NotFound(_) => ServiceError::NotFound(target.shown()).into(),
                other => other.into(),
            })
    }

    async fn parent_exists(&self, target: &Target) -> Result<bool, ApiError> {
        let Some(parent) = target.parent() else {
            return Ok(true);
        };
        Ok(self.state.files.folder_exists(self.owner, &parent).await?)
    }

    /// Check the request's `If` header (412 when it does not hold) and give
    /// the lock tokens it submits, with which the service lets the change
    /// through the locks on what it changes (423 otherwise).
    async fn preconditions(&self, target: &Target, node: &Node) -> Result<LockTokens, ApiError> {
        let condition = IfHeader::from_headers(self.headers).map_err(ApiError::BadRequest)?;
        let Some(condition) = condition else {
            return Ok(LockTokens::default());
        };
        let locks = self.state.files.locks(self.owner).await?;
        let mut states: HashMap<Option<String>, ResourceState> = HashMap::new();
        states.insert(None, resource_state(node, &key_of(node, target), &locks));
        let mut tags: Vec<&str> = condition.tags().collect();
        tags.sort_unstable();
        tags.dedup();
        if tags.len() > MAX_IF_TAGS {
            return Err(ApiError::BadRequest(format!(
                "an If header may name at most {MAX_IF_TAGS} resources"
            )));
        }
        for tag in tags {
            if states.contains_key(&Some(tag.to_owned())) {
                continue;
            }
            let state = match self.tag_target(tag) {
                Some(tagged) => {
                    let tagged_node = self.node(&tagged).await?;
                    resource_state(&tagged_node, &key_of(&tagged_node, &tagged), &locks)
                }
                None => ResourceState::default(),
            };
            states.insert(Some(tag.to_owned()), state);
        }
        let empty = ResourceState::default();
        let holds = condition.holds(|tag| states.get(&tag.map(str::to_owned)).unwrap_or(&empty));
        if !holds {
            return Err(ApiError::PreconditionFailed(
                "the If header's conditions do not hold".into(),
            ));
        }
        Ok(LockTokens::new(
            condition.submitted_tokens().map(str::to_owned).collect(),
        ))
    }

    /// The resource an `If` tag names. Only its path counts: every tag is
    /// looked up in the caller's own tree, and a proxy may have rewritten
    /// the `Host` the client saw.
    fn tag_target(&self, url: &str) -> Option<Target> {
        let uri: Uri = url.parse().ok()?;
        Target::from_path(uri.path())?.ok()
    }
}

/// What the `If` header's conditions are checked against for one resource.
fn resource_state(node: &Node, key: &str, locks: &[DavLock]) -> ResourceState {
    ResourceState {
        etag: match node {
            Node::File(meta) => Some(format!("\"{}\"", meta.sha256)),
            _ => None,
        },
        lock_tokens: locks
            .iter()
            .filter(|lock| lock.covers(key))
            .map(|lock| lock.token.clone())
            .collect(),
    }
}

/// Why a streamed answer stopped early.
#[derive(Debug, thiserror::Error)]
enum Stopped {
    #[error(transparent)]
    Cut(#[from] storage_host::runtime::Cut),
    #[error(transparent)]
    Failed(#[from] ApiError),
}

impl From<ServiceError> for Stopped {
    fn from(error: ServiceError) -> Self {
        Self::Failed(error.into())
    }
}

/// An XML answer with `status`.
fn xml_answer(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        body,
    )
        .into_response()
}

/// 423 with the `lock-token-submitted` precondition naming the lock's root.
fn lock_token_needed(root_href: &str) -> Response {
    let mut document = Document::new("error");
    document
        .open("lock-token-submitted")
        .leaf("href", root_href)
        .close("lock-token-submitted");
    xml_answer(StatusCode::LOCKED, document.finish("error"))
}
