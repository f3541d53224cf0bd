//! `/dav/`: WebDAV classes 1 and 2 (RFC 4918) over the same trees as
//! `/files/`, so the store mounts as a drive.
//!
//! `/dav/{path}` is `/files/{path}` of the same caller: a file is a
//! resource, a folder (made on purpose, or holding files) a collection,
//! `/dav/` the caller's root. `GET`, `HEAD`, `PUT` and `DELETE` of files go
//! through the instance pool exactly as the REST API's do (hashed on upload,
//! verified on download, the same limits and memory budget). The rest is
//! the host's: `PROPFIND` (depth 0 and 1; infinity is refused), `PROPPATCH`
//! (dead properties in the database), `MKCOL`, `COPY` and `MOVE` (rows, not
//! bytes: content is addressed by digest), `LOCK` and `UNLOCK` (locks in the
//! database, so they hold across gateways).
//!
//! - `xml`: request bodies in, multistatus answers out (quick-xml).
//! - `conditions`: the `If` header, and which lock tokens a request submits.

mod conditions;
mod xml;

use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use volume::webdav::{DavLock, Depth, LockOutcome, NewLock, Node, PropertyChange, Transfer};
use volume::{Entry, FileMeta, FilePath, Owner, Prefix};

use crate::AppState;
use crate::auth::Caller;
use crate::error::AppError;
use crate::routes::files::{self, Read};
use crate::routes::read_small_body;

use self::conditions::{IfHeader, ResourceState};
use self::xml::{DAV, Document, PropName, Propfind};

/// The largest XML body accepted (`PROPFIND`, `PROPPATCH`, `LOCK`).
const MAX_XML_BODY: usize = 256 * 1024;

/// The most resources an `If` header may name by tag (each is looked up).
const MAX_IF_TAGS: usize = 16;

/// A lock's timeout when the client names none, and the longest granted.
const DEFAULT_LOCK_TIMEOUT_S: u64 = 3600;
const MAX_LOCK_TIMEOUT_S: u64 = 24 * 3600;

/// Entries read per index page while listing a collection.
const LISTING_PAGE: u32 = 1000;

const ALLOW: &str =
    "OPTIONS, GET, HEAD, PUT, DELETE, MKCOL, PROPFIND, PROPPATCH, COPY, MOVE, LOCK, UNLOCK";

/// What stays raw in an href's path segments (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/dav", any(handle))
        .route("/dav/", any(handle))
        .route("/dav/{*path}", any(handle))
}

async fn handle(State(state): State<AppState>, caller: Caller, request: Request) -> Response {
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
            other => Err(AppError::MethodNotAllowed(format!(
                "{other} is not a WebDAV method this server knows"
            ))),
        },
    };
    let mut response = match answer {
        Ok(response) => response,
        // RFC 4918 §16: say which lock's token was missing.
        Err(AppError::Locked(root)) => lock_token_needed(&root),
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

/// A request's resource: the root, or a name (the trailing slash a client
/// may add to a collection does not change which resource it is).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    name: Option<FilePath>,
}

impl Target {
    fn from_uri(uri: &Uri) -> Result<Self, AppError> {
        Self::from_path(uri.path())
            .ok_or_else(|| AppError::BadRequest(format!("{} is not under /dav/", uri.path())))?
    }

    /// The resource of a URL path, if it lies under `/dav`.
    fn from_path(path: &str) -> Option<Result<Self, AppError>> {
        let rest = path.strip_prefix("/dav")?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        Some(if rest.is_empty() {
            Ok(Self { name: None })
        } else {
            FilePath::from_url(rest)
                .map(|name| Self { name: Some(name) })
                .map_err(AppError::from)
        })
    }

    fn shown(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(|| "/".to_owned(), ToString::to_string)
    }

    /// The folder this resource is in (`None` for the root itself).
    fn parent(&self) -> Option<Prefix> {
        let name = self.name.as_ref()?;
        // A valid name's parent is valid: parsing cannot fail.
        Some(Prefix::parse(parent_key_of(name.as_str())).unwrap_or_else(|_| Prefix::root()))
    }
}

/// The key properties and locks are stored by: a file's path, a folder's
/// prefix (empty for the root).
fn key_of(node: &Node, target: &Target) -> String {
    match node {
        Node::File(meta) => meta.path.clone(),
        Node::Folder(folder) => folder.prefix.as_str().to_owned(),
        // Not there yet: named as the file it would be.
        Node::Missing => target
            .name
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    }
}

/// The href of a resource key.
fn href(key: &str) -> String {
    let mut href = String::from("/dav/");
    let (path, folder) = match key.strip_suffix('/') {
        Some(path) => (path, true),
        None => (key, false),
    };
    for (at, segment) in path.split('/').filter(|s| !s.is_empty()).enumerate() {
        if at > 0 {
            href.push('/');
        }
        href.extend(utf8_percent_encode(segment, SEGMENT));
    }
    if folder {
        href.push('/');
    }
    href
}

/// `COPY` or `MOVE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Copy,
    Move,
}

/// What a request changes, for the locks that must have been submitted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    /// The resource of this key (a folder's membership, for a new member).
    One(&'a str),
    /// The resource of this key and everything under it.
    Tree(&'a str),
}

/// One request's view: who asks, in which tree, with which headers.
struct Dav<'a> {
    state: &'a AppState,
    caller: &'a Caller,
    owner: Owner,
    headers: &'a HeaderMap,
}

impl Dav<'_> {
    async fn node(&self, target: &Target) -> Result<Node, AppError> {
        self.state
            .volume
            .node(self.owner, target.name.as_ref())
            .await
            .map_err(|error| AppError::from_volume(error, &target.shown()))
    }

    async fn locks(&self) -> Result<Vec<DavLock>, AppError> {
        self.state
            .volume
            .webdav()
            .locks(self.owner)
            .await
            .map_err(|error| AppError::from_volume(error, "locks"))
    }

    async fn parent_exists(&self, target: &Target) -> Result<bool, AppError> {
        let Some(parent) = target.parent() else {
            return Ok(true);
        };
        self.state
            .volume
            .folder_exists(self.owner, &parent)
            .await
            .map_err(|error| AppError::from_volume(error, parent.as_str()))
    }

    /// Check the request's `If` header (412 when it does not hold) and that
    /// it submits the token of every lock on what it changes (423).
    async fn preconditions(
        &self,
        target: &Target,
        node: &Node,
        changes: &[Change<'_>],
    ) -> Result<(), AppError> {
        let condition = IfHeader::from_headers(self.headers).map_err(AppError::BadRequest)?;
        let locks = self.locks().await?;
        if let Some(condition) = &condition {
            let mut states: HashMap<Option<String>, ResourceState> = HashMap::new();
            states.insert(None, resource_state(node, &key_of(node, target), &locks));
            let mut tags: Vec<&str> = condition.tags().collect();
            tags.sort_unstable();
            tags.dedup();
            if tags.len() > MAX_IF_TAGS {
                return Err(AppError::BadRequest(format!(
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
            let holds =
                condition.holds(|tag| states.get(&tag.map(str::to_owned)).unwrap_or(&empty));
            if !holds {
                return Err(AppError::PreconditionFailed(
                    "the If header's conditions do not hold".into(),
                ));
            }
        }
        refuse_locked(&locks, condition.as_ref(), changes)
    }

    /// The resource an `If` tag names. Only its path counts: every tag is
    /// looked up in the caller's own tree, and a proxy may have rewritten
    /// the `Host` the client saw.
    fn tag_target(&self, url: &str) -> Option<Target> {
        let uri: Uri = url.parse().ok()?;
        Target::from_path(uri.path())?.ok()
    }

    async fn get(&self, target: &Target, read: Read) -> Result<Response, AppError> {
        match self.node(target).await? {
            Node::File(meta) => {
                let path = FilePath::parse(&meta.path)?;
                files::read_file(self.state, self.owner, &path, self.headers, read).await
            }
            Node::Folder(folder) => self.folder_page(&folder.prefix, read).await,
            Node::Missing => Err(AppError::NotFound(target.shown())),
        }
    }

    /// A collection's `GET`: a plain HTML list of what it holds.
    async fn folder_page(&self, prefix: &Prefix, read: Read) -> Result<Response, AppError> {
        use quick_xml::escape::escape;
        let mut page = format!(
            "<!doctype html><meta charset=\"utf-8\"><title>{0}</title><h1>{0}</h1><ul>",
            escape(href(prefix.as_str()))
        );
        if read == Read::Content {
            for entry in self.entries(prefix).await? {
                let name = &entry.name()[prefix.as_str().len()..];
                page.push_str(&format!(
                    "<li><a href=\"{}\">{}</a></li>",
                    escape(href(entry.name())),
                    escape(name)
                ));
            }
        }
        page.push_str("</ul>");
        let headers = [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
        ];
        Ok(match read {
            Read::Content => (StatusCode::OK, headers, page).into_response(),
            Read::Headers => (StatusCode::OK, headers).into_response(),
        })
    }

    /// Everything directly in a folder, every page of it.
    async fn entries(&self, prefix: &Prefix) -> Result<Vec<Entry>, AppError> {
        let mut entries = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .state
                .volume
                .list(self.owner, prefix, after.as_deref(), LISTING_PAGE)
                .await
                .map_err(|error| AppError::from_volume(error, prefix.as_str()))?;
            entries.extend(page.entries);
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok(entries),
            }
        }
    }

    async fn put(&self, target: &Target, body: Body) -> Result<Response, AppError> {
        let Some(name) = &target.name else {
            return Err(AppError::MethodNotAllowed(
                "the root collection cannot be replaced by a file".into(),
            ));
        };
        let node = self.node(target).await?;
        if matches!(node, Node::Folder(_)) {
            return Err(AppError::MethodNotAllowed(format!(
                "{name} is a collection; PUT stores files"
            )));
        }
        if !self.parent_exists(target).await? {
            return Err(AppError::Conflict(format!(
                "the collection {name} would be in does not exist (MKCOL it first)"
            )));
        }
        let parent = parent_key(target);
        self.preconditions(
            target,
            &node,
            &[Change::One(name.as_str()), Change::One(&parent)],
        )
        .await?;
        let meta = files::store(self.state, self.caller, name, self.headers, body).await?;
        let status = if matches!(node, Node::Missing) {
            StatusCode::CREATED
        } else {
            StatusCode::NO_CONTENT
        };
        let etag = HeaderValue::from_str(&format!("\"{}\"", meta.sha256))
            .map_err(|error| AppError::Internal(error.to_string()))?;
        Ok((status, [(header::ETAG, etag)]).into_response())
    }

    async fn delete(&self, target: &Target) -> Result<Response, AppError> {
        let node = self.node(target).await?;
        let key = key_of(&node, target);
        let parent = parent_key(target);
        match &node {
            Node::Missing => return Err(AppError::NotFound(target.shown())),
            Node::Folder(_) if target.name.is_none() => {
                return Err(AppError::Forbidden(
                    "the root collection cannot be deleted".into(),
                ));
            }
            _ => {}
        }
        self.preconditions(target, &node, &[Change::Tree(&key), Change::One(&parent)])
            .await?;
        match node {
            Node::File(meta) => {
                files::delete(self.state, self.owner, &FilePath::parse(&meta.path)?).await?;
            }
            Node::Folder(folder) => {
                self.state
                    .volume
                    .delete_folder(self.owner, &folder.prefix)
                    .await
                    .map_err(|error| AppError::from_volume(error, folder.prefix.as_str()))?;
            }
            Node::Missing => {}
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    }

    async fn mkcol(&self, target: &Target, body: Body) -> Result<Response, AppError> {
        if !read_small_body(body, MAX_XML_BODY).await?.is_empty() {
            return Err(AppError::UnsupportedMediaType(
                "MKCOL takes no body here".into(),
            ));
        }
        let Some(name) = &target.name else {
            return Err(AppError::MethodNotAllowed(
                "the root collection exists".into(),
            ));
        };
        let node = self.node(target).await?;
        if !matches!(node, Node::Missing) {
            return Err(AppError::MethodNotAllowed(format!("{name} exists")));
        }
        if !self.parent_exists(target).await? {
            return Err(AppError::Conflict(format!(
                "the collection {name} would be in does not exist"
            )));
        }
        let parent = parent_key(target);
        self.preconditions(target, &node, &[Change::One(&parent)])
            .await?;
        let folder = Prefix::parse(name.as_str())?;
        self.state
            .volume
            .webdav()
            .forget(self.owner, folder.as_str())
            .await
            .map_err(|error| AppError::from_volume(error, folder.as_str()))?;
        self.state
            .volume
            .make_folder(self.owner, &folder)
            .await
            .map_err(|error| AppError::from_volume(error, folder.as_str()))?;
        Ok(StatusCode::CREATED.into_response())
    }

    async fn propfind(&self, target: &Target, body: Body) -> Result<Response, AppError> {
        let depth_one = match self.headers.get("depth").map(HeaderValue::as_bytes) {
            Some(b"0") => false,
            Some(b"1") => true,
            _ => return Ok(finite_depth_only()),
        };
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let asked = xml::parse_propfind(&body).map_err(|e| AppError::BadRequest(e.to_string()))?;
        let node = self.node(target).await?;
        if matches!(node, Node::Missing) {
            return Err(AppError::NotFound(target.shown()));
        }
        let key = key_of(&node, target);
        let store = self.state.volume.webdav();
        let locks = self.locks().await?;
        let holders = if locks.is_empty() {
            HashMap::new()
        } else {
            store
                .holders(self.owner)
                .await
                .map_err(|error| AppError::from_volume(error, &key))?
        };
        let mut resources = vec![(key, node)];
        if let (true, Node::Folder(folder)) = (depth_one, &resources[0].1) {
            let prefix = folder.prefix.clone();
            for entry in self.entries(&prefix).await? {
                resources.push(match entry {
                    Entry::File(meta) => (meta.path.clone(), Node::File(meta)),
                    Entry::Folder(path) => {
                        let prefix = Prefix::parse(&path)?;
                        (
                            path,
                            Node::Folder(volume::webdav::FolderMeta {
                                prefix,
                                created_ms: None,
                            }),
                        )
                    }
                });
            }
        }
        let keys: Vec<String> = resources.iter().map(|(key, _)| key.clone()).collect();
        if depth_one {
            // The listing knows folders by name only: their dates, if made.
            let made = store
                .folders_made(self.owner, &keys[1..])
                .await
                .map_err(|error| AppError::from_volume(error, &keys[0]))?;
            for (key, node) in resources.iter_mut().skip(1) {
                if let Node::Folder(folder) = node {
                    folder.created_ms = made.get(key.as_str()).copied();
                }
            }
        }
        let mut dead = HashMap::<String, Vec<volume::webdav::DeadProperty>>::new();
        for (path, property) in store
            .properties_of(self.owner, &keys)
            .await
            .map_err(|error| AppError::from_volume(error, &keys[0]))?
        {
            dead.entry(path).or_default().push(property);
        }
        let mut document = Document::new("multistatus");
        for (key, node) in &resources {
            let properties = dead.get(key).map(Vec::as_slice).unwrap_or_default();
            let resource = Resource {
                key,
                node,
                dead: properties,
                locks: &locks,
                holders: &holders,
            };
            resource.describe(&mut document, &asked);
        }
        Ok(multistatus(document))
    }

    async fn proppatch(&self, target: &Target, body: Body) -> Result<Response, AppError> {
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let changes =
            xml::parse_proppatch(&body).map_err(|e| AppError::BadRequest(e.to_string()))?;
        let node = self.node(target).await?;
        if matches!(node, Node::Missing) {
            return Err(AppError::NotFound(target.shown()));
        }
        let key = key_of(&node, target);
        self.preconditions(target, &node, &[Change::One(&key)])
            .await?;
        let name_of = |change: &PropertyChange| match change {
            PropertyChange::Set(property) => PropName {
                namespace: property.namespace.clone(),
                name: property.name.clone(),
            },
            PropertyChange::Remove { namespace, name } => PropName {
                namespace: namespace.clone(),
                name: name.clone(),
            },
        };
        let mut names: Vec<PropName> = Vec::new();
        for change in &changes {
            let name = name_of(change);
            if !names.contains(&name) {
                names.push(name);
            }
        }
        // WebDAV's own properties are computed: none can be set or removed,
        // and then nothing else is changed either.
        let (protected, free): (Vec<PropName>, Vec<PropName>) =
            names.into_iter().partition(|name| name.namespace == DAV);
        let mut document = Document::new("multistatus");
        document.open("response").leaf("href", &href(&key));
        if protected.is_empty() {
            self.state
                .volume
                .webdav()
                .change_properties(self.owner, &key, &changes)
                .await
                .map_err(|error| AppError::from_volume(error, &key))?;
            propstat(&mut document, &free, "HTTP/1.1 200 OK");
        } else {
            propstat(&mut document, &protected, "HTTP/1.1 403 Forbidden");
            propstat(&mut document, &free, "HTTP/1.1 424 Failed Dependency");
        }
        document.close("response");
        Ok(multistatus(document))
    }

    async fn transfer(&self, target: &Target, verb: Verb) -> Result<Response, AppError> {
        let copy = verb == Verb::Copy;
        let destination = self
            .headers
            .get("destination")
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| AppError::BadRequest("a Destination header is needed".into()))?;
        let to = self.destination(destination)?;
        let (Some(from_name), Some(to_name)) = (&target.name, &to.name) else {
            return Err(AppError::Forbidden(
                "the root collection cannot be copied, moved or replaced".into(),
            ));
        };
        let node = self.node(target).await?;
        let folder = match node {
            Node::Missing => return Err(AppError::NotFound(target.shown())),
            Node::Folder(_) => true,
            Node::File(_) => false,
        };
        // RFC 4918 9.8.3, 9.9.2: a collection is copied with Depth 0 or
        // infinity, moved with infinity; for a file Depth means nothing.
        let depth = match self.headers.get("depth").map(HeaderValue::as_bytes) {
            None | Some(b"infinity") => Depth::Infinity,
            Some(b"0") if copy || !folder => Depth::Zero,
            Some(_) if !folder => Depth::Infinity,
            _ => {
                return Err(AppError::BadRequest(if copy {
                    "COPY of a collection takes Depth 0 or infinity".into()
                } else {
                    "MOVE of a collection takes Depth infinity".into()
                }));
            }
        };
        let overwrite = match self.headers.get("overwrite").map(HeaderValue::as_bytes) {
            None | Some(b"T" | b"t") => true,
            Some(b"F" | b"f") => false,
            _ => return Err(AppError::BadRequest("Overwrite is T or F".into())),
        };
        let (from_path, to_path) = (from_name.as_str(), to_name.as_str());
        if !self.parent_exists(&to).await? {
            return Err(AppError::Conflict(format!(
                "the collection {to_name} would be in does not exist"
            )));
        }
        let to_node = self.node(&to).await?;
        let (from_key, to_key) = (key_of(&node, target), key_of(&to_node, &to));
        let to_folder = format!("{to_path}/");
        let (from_parent, to_parent) = (parent_key(target), parent_key(&to));
        let mut changes = vec![
            Change::Tree(&to_key),
            Change::Tree(&to_folder),
            Change::One(&to_parent),
        ];
        if !copy {
            changes.extend([Change::Tree(&from_key), Change::One(&from_parent)]);
        }
        self.preconditions(target, &node, &changes).await?;
        let volume = &self.state.volume;
        let done = if copy {
            volume
                .copy_node(self.owner, from_name, to_name, depth, overwrite)
                .await
        } else {
            volume
                .move_node(self.owner, from_name, to_name, overwrite)
                .await
        };
        match done {
            Ok(Transfer::Created) => {
                let created = if folder {
                    to_folder
                } else {
                    to_path.to_owned()
                };
                let location = HeaderValue::from_str(&href(&created))
                    .map_err(|error| AppError::Internal(error.to_string()))?;
                Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
            }
            Ok(Transfer::Replaced) => Ok(StatusCode::NO_CONTENT.into_response()),
            Err(volume::VolumeError::AlreadyExists(_)) => Err(AppError::PreconditionFailed(
                format!("{to_name} exists and Overwrite is F"),
            )),
            Err(error) => Err(AppError::from_volume(error, from_path)),
        }
    }

    /// The resource a `Destination` header names: ours, under `/dav/`. A
    /// URL naming another host than the request's `Host` (or the
    /// `X-Forwarded-Host` a proxy set) is another server's: `502`.
    fn destination(&self, url: &str) -> Result<Target, AppError> {
        let uri: Uri = url
            .parse()
            .map_err(|_| AppError::BadRequest("the Destination is not a URL".into()))?;
        if let Some(authority) = uri.authority() {
            let named = without_default_port(authority.as_str(), uri.scheme_str());
            let ours = [header::HOST.as_str(), "x-forwarded-host"]
                .into_iter()
                .filter_map(|name| self.headers.get(name)?.to_str().ok())
                .flat_map(|value| value.split(','))
                .any(|host| {
                    without_default_port(host.trim(), uri.scheme_str()).eq_ignore_ascii_case(named)
                });
            if !ours {
                return Err(AppError::BadGateway(
                    "the Destination is on another server".into(),
                ));
            }
        }
        Target::from_path(uri.path()).unwrap_or_else(|| {
            Err(AppError::BadGateway(
                "the Destination is not under /dav/".into(),
            ))
        })
    }

    async fn lock(&self, target: &Target, body: Body) -> Result<Response, AppError> {
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let timeout_s = lock_timeout(self.headers);
        let node = self.node(target).await?;
        let key = key_of(&node, target);
        if body.iter().all(u8::is_ascii_whitespace) {
            return self.refresh(target, &node, &key, timeout_s).await;
        }
        let info = xml::parse_lockinfo(&body).map_err(|e| AppError::BadRequest(e.to_string()))?;
        let infinite = match self.headers.get("depth").map(HeaderValue::as_bytes) {
            None | Some(b"infinity") => true,
            Some(b"0") => false,
            _ => {
                return Err(AppError::BadRequest(
                    "LOCK takes Depth 0 or infinity".into(),
                ));
            }
        };
        let Some(name) = &target.name else {
            return Err(AppError::Forbidden(
                "the root collection cannot be locked".into(),
            ));
        };
        let created = matches!(node, Node::Missing);
        if created && !self.parent_exists(target).await? {
            return Err(AppError::Conflict(format!(
                "the collection {name} would be in does not exist"
            )));
        }
        // The If header must hold, and a new file joins its folder (whose
        // lock's token is then needed); conflicts are the grant's to find.
        let parent = parent_key(target);
        let changes: &[Change<'_>] = if created {
            &[Change::One(&parent)]
        } else {
            &[]
        };
        self.preconditions(target, &node, changes).await?;
        let holder = info.holder.clone();
        let granted = self
            .state
            .volume
            .webdav()
            .lock(
                self.owner,
                NewLock {
                    token: new_lock_token(),
                    root: key,
                    infinite,
                    exclusive: info.exclusive,
                    holder: info.holder,
                    timeout_s,
                },
            )
            .await
            .map_err(|error| AppError::from_volume(error, name.as_str()))?;
        let lock = match granted {
            LockOutcome::Granted(lock) => lock,
            LockOutcome::Conflict => return Err(AppError::Locked(href(&key_of(&node, target)))),
            LockOutcome::TooMany => {
                return Err(AppError::Unavailable(format!(
                    "this tree holds {} locks already",
                    volume::webdav::MAX_LOCKS_PER_OWNER
                )));
            }
        };
        if created {
            // RFC 4918 §7.3: locking an unmapped URL makes an empty file,
            // unless a file appeared there meanwhile.
            let mut create_only = HeaderMap::new();
            create_only.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
            let stored =
                files::store(self.state, self.caller, name, &create_only, Body::empty()).await;
            if let Err(error) = stored {
                let _ = self
                    .state
                    .volume
                    .webdav()
                    .unlock(self.owner, &lock.token)
                    .await;
                return Err(error);
            }
        }
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
    ) -> Result<Response, AppError> {
        if matches!(node, Node::Missing) {
            return Err(AppError::NotFound(target.shown()));
        }
        let condition = IfHeader::from_headers(self.headers)
            .map_err(AppError::BadRequest)?
            .ok_or_else(|| {
                AppError::BadRequest("a LOCK refresh names its lock in an If header".into())
            })?;
        let locks = self.locks().await?;
        let lock = locks.iter().find(|lock| {
            lock.covers(key)
                && condition
                    .submitted_tokens()
                    .any(|token| token == lock.token)
        });
        let Some(lock) = lock else {
            return Err(AppError::PreconditionFailed(
                "the If header names no lock on this resource".into(),
            ));
        };
        let refreshed = self
            .state
            .volume
            .webdav()
            .refresh_lock(self.owner, &lock.token, timeout_s)
            .await
            .map_err(|error| AppError::from_volume(error, key))?
            .ok_or_else(|| AppError::PreconditionFailed("the lock expired".into()))?;
        let holders = self
            .state
            .volume
            .webdav()
            .holders(self.owner)
            .await
            .map_err(|error| AppError::from_volume(error, key))?;
        let holder = holders.get(&refreshed.token).map_or("", String::as_str);
        Ok(lock_answer(StatusCode::OK, &refreshed, holder))
    }

    async fn unlock(&self, target: &Target) -> Result<Response, AppError> {
        let token = self
            .headers
            .get("lock-token")
            .and_then(|value| value.to_str().ok())
            .map(|value| value.trim().trim_start_matches('<').trim_end_matches('>'))
            .ok_or_else(|| AppError::BadRequest("UNLOCK needs a Lock-Token header".into()))?;
        let node = self.node(target).await?;
        let key = key_of(&node, target);
        let covers = self
            .locks()
            .await?
            .iter()
            .any(|lock| lock.token == token && lock.covers(&key));
        if !covers {
            return Err(AppError::Conflict(
                "no lock with that token covers this resource".into(),
            ));
        }
        self.state
            .volume
            .webdav()
            .unlock(self.owner, token)
            .await
            .map_err(|error| AppError::from_volume(error, &key))?;
        Ok(StatusCode::NO_CONTENT.into_response())
    }
}

/// Refuse (`423`) a change that a lock covers unless `condition` submits
/// the lock's token.
fn refuse_locked(
    locks: &[DavLock],
    condition: Option<&IfHeader>,
    changes: &[Change<'_>],
) -> Result<(), AppError> {
    let submitted: Vec<&str> = condition
        .into_iter()
        .flat_map(IfHeader::submitted_tokens)
        .collect();
    for change in changes {
        let (key, tree) = match *change {
            Change::One(key) => (key, false),
            Change::Tree(key) => (key, true),
        };
        let blocking = locks.iter().find(|lock| {
            (lock.covers(key) || (tree && lock.within(key)))
                && !submitted.contains(&lock.token.as_str())
        });
        if let Some(lock) = blocking {
            return Err(AppError::Locked(href(&lock.root)));
        }
    }
    Ok(())
}

/// The REST API honours WebDAV locks too: refuse (`423`) a change to
/// `owner`'s tree that a live lock covers unless the request's `If` header
/// submits its token. One small query, and only when the tree has locks
/// does anything more happen.
pub(crate) async fn check_locks(
    state: &AppState,
    owner: Owner,
    headers: &HeaderMap,
    changes: &[Change<'_>],
) -> Result<(), AppError> {
    let locks = state
        .volume
        .webdav()
        .locks(owner)
        .await
        .map_err(|error| AppError::from_volume(error, "locks"))?;
    if locks.is_empty() {
        return Ok(());
    }
    let condition = IfHeader::from_headers(headers).map_err(AppError::BadRequest)?;
    refuse_locked(&locks, condition.as_ref(), changes)
}

/// The key of the folder the file or folder `path` is in.
pub(crate) fn parent_key_of(path: &str) -> &str {
    let path = path.strip_suffix('/').unwrap_or(path);
    path.rfind('/').map_or("", |slash| &path[..=slash])
}

/// `host[:port]` without the scheme's default port.
fn without_default_port<'a>(authority: &'a str, scheme: Option<&str>) -> &'a str {
    let default = match scheme {
        Some("https") => ":443",
        _ => ":80",
    };
    authority.strip_suffix(default).unwrap_or(authority)
}

/// The key of the folder a resource is in.
fn parent_key(target: &Target) -> String {
    target
        .name
        .as_ref()
        .map(|name| parent_key_of(name.as_str()).to_owned())
        .unwrap_or_default()
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
    let body = document.finish("prop");
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/xml; charset=utf-8"),
    );
    if let Ok(token) = HeaderValue::from_str(&format!("<{}>", lock.token)) {
        headers.insert("lock-token", token);
    }
    response
}

/// A lock as lock discovery shows it; `holder` is its `DAV:owner` fragment.
fn active_lock(document: &mut Document, lock: &DavLock, holder: &str) {
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

fn multistatus(document: Document) -> Response {
    (
        StatusCode::MULTI_STATUS,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        document.finish("multistatus"),
    )
        .into_response()
}

/// 423 with the `lock-token-submitted` precondition naming the lock's root.
fn lock_token_needed(root: &str) -> Response {
    let mut document = Document::new("error");
    document
        .open("lock-token-submitted")
        .leaf("href", root)
        .close("lock-token-submitted");
    (
        StatusCode::LOCKED,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        document.finish("error"),
    )
        .into_response()
}

/// 403 for a `PROPFIND` of unbounded depth (RFC 4918 §9.1).
fn finite_depth_only() -> Response {
    let mut document = Document::new("error");
    document.empty("propfind-finite-depth");
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
        document.finish("error"),
    )
        .into_response()
}

/// A `propstat` naming properties (empty elements) with one status.
fn propstat(document: &mut Document, names: &[PropName], status: &str) {
    if names.is_empty() {
        return;
    }
    document.open("propstat").open("prop");
    for name in names {
        document.property(name, None);
    }
    document
        .close("prop")
        .leaf("status", status)
        .close("propstat");
}

/// The live properties every resource may have, in the order `allprop`
/// shows them.
const LIVE: [&str; 9] = [
    "resourcetype",
    "displayname",
    "creationdate",
    "getlastmodified",
    "getcontentlength",
    "getcontenttype",
    "getetag",
    "supportedlock",
    "lockdiscovery",
];

/// One resource being described in a multistatus.
struct Resource<'a> {
    key: &'a str,
    node: &'a Node,
    dead: &'a [volume::webdav::DeadProperty],
    locks: &'a [DavLock],
    /// The locks' holders, by token.
    holders: &'a HashMap<String, String>,
}

impl Resource<'_> {
    fn file(&self) -> Option<&FileMeta> {
        match self.node {
            Node::File(meta) => Some(meta),
            _ => None,
        }
    }

    /// Whether this resource has the live property `name`.
    fn has_live(&self, name: &str) -> bool {
        match name {
            "getcontentlength" | "getcontenttype" | "getetag" => self.file().is_some(),
            "creationdate" | "getlastmodified" => self.modified_ms().is_some(),
            _ => LIVE.contains(&name),
        }
    }

    fn modified_ms(&self) -> Option<i64> {
        match self.node {
            Node::File(meta) => Some(meta.modified_ms),
            Node::Folder(folder) => folder.created_ms,
            Node::Missing => None,
        }
    }

    fn created_ms(&self) -> Option<i64> {
        match self.node {
            Node::File(meta) => Some(meta.created_ms),
            Node::Folder(folder) => folder.created_ms,
            Node::Missing => None,
        }
    }

    /// Write the live property `name` (which [`Resource::has_live`]).
    fn write_live(&self, document: &mut Document, name: &str) {
        let text = match name {
            "resourcetype" => {
                if matches!(self.node, Node::Folder(_)) {
                    document
                        .open("resourcetype")
                        .empty("collection")
                        .close("resourcetype");
                } else {
                    document.empty("resourcetype");
                }
                return;
            }
            "supportedlock" => {
                document.open("supportedlock");
                for scope in ["exclusive", "shared"] {
                    document
                        .open("lockentry")
                        .open("lockscope")
                        .empty(scope)
                        .close("lockscope")
                        .open("locktype")
                        .empty("write")
                        .close("locktype")
                        .close("lockentry");
                }
                document.close("supportedlock");
                return;
            }
            "lockdiscovery" => {
                document.open("lockdiscovery");
                for lock in self.locks.iter().filter(|lock| lock.covers(self.key)) {
                    let holder = self.holders.get(&lock.token).map_or("", String::as_str);
                    active_lock(document, lock, holder);
                }
                document.close("lockdiscovery");
                return;
            }
            "displayname" => {
                let trimmed = self.key.trim_end_matches('/');
                trimmed.rsplit('/').next().unwrap_or_default().to_owned()
            }
            "creationdate" => files::rfc3339(self.created_ms().unwrap_or_default()),
            "getlastmodified" => httpdate::fmt_http_date(
                UNIX_EPOCH
                    + Duration::from_millis(
                        u64::try_from(self.modified_ms().unwrap_or_default()).unwrap_or_default(),
                    ),
            ),
            "getcontentlength" => self.file().map(|m| m.size.to_string()).unwrap_or_default(),
            "getcontenttype" => self
                .file()
                .map(|m| m.content_type.clone())
                .unwrap_or_default(),
            "getetag" => self
                .file()
                .map(|m| format!("\"{}\"", m.sha256))
                .unwrap_or_default(),
            _ => return,
        };
        document.leaf(name, &text);
    }

    fn dead_value(&self, name: &PropName) -> Option<&str> {
        self.dead
            .iter()
            .find(|p| p.namespace == name.namespace && p.name == name.name)
            .map(|p| p.value.as_str())
    }

    /// This resource's `response` element for what `asked` names.
    fn describe(&self, document: &mut Document, asked: &Propfind) {
        document.open("response").leaf("href", &href(self.key));
        let live: Vec<&str> = LIVE.into_iter().filter(|n| self.has_live(n)).collect();
        match asked {
            Propfind::AllProp | Propfind::PropName => {
                let names_only = matches!(asked, Propfind::PropName);
                document.open("propstat").open("prop");
                for name in &live {
                    if names_only {
                        document.empty(name);
                    } else {
                        self.write_live(document, name);
                    }
                }
                for property in self.dead {
                    let name = PropName {
                        namespace: property.namespace.clone(),
                        name: property.name.clone(),
                    };
                    let value = (!names_only).then_some(property.value.as_str());
                    document.property(&name, value);
                }
                document
                    .close("prop")
                    .leaf("status", "HTTP/1.1 200 OK")
                    .close("propstat");
            }
            Propfind::Prop(names) => {
                let mut missing = Vec::new();
                let mut found = Vec::new();
                for name in names {
                    let here = if name.namespace == DAV {
                        self.has_live(&name.name)
                    } else {
                        self.dead_value(name).is_some()
                    };
                    if here {
                        found.push(name);
                    } else {
                        missing.push(name.clone());
                    }
                }
                if !found.is_empty() {
                    document.open("propstat").open("prop");
                    for name in found {
                        if name.namespace == DAV {
                            self.write_live(document, &name.name);
                        } else if let Some(value) = self.dead_value(name) {
                            document.property(name, Some(value));
                        }
                    }
                    document
                        .close("prop")
                        .leaf("status", "HTTP/1.1 200 OK")
                        .close("propstat");
                }
                propstat(document, &missing, "HTTP/1.1 404 Not Found");
            }
        }
        document.close("response");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_hrefs() {
        let target = |path: &str| {
            Target::from_path(path).map(|t| t.map(|t| t.name.map(|n| n.to_string())).ok())
        };
        assert_eq!(target("/dav"), Some(Some(None)));
        assert_eq!(target("/dav/"), Some(Some(None)));
        assert_eq!(target("/dav/a/b/"), Some(Some(Some("a/b".into()))));
        assert_eq!(
            target("/dav/res-%e2%82%ac"),
            Some(Some(Some("res-€".into())))
        );
        assert_eq!(target("/dav/a/../b"), Some(None));
        assert_eq!(target("/davx"), None);
        assert_eq!(target("/files/a"), None);
        assert_eq!(href(""), "/dav/");
        assert_eq!(href("a b/c€/"), "/dav/a%20b/c%E2%82%AC/");
        assert_eq!(href("x&y"), "/dav/x%26y");
        assert_eq!(parent_key_of("a/b/c"), "a/b/");
        assert_eq!(parent_key_of("a/b/"), "a/");
        assert_eq!(parent_key_of("a"), "");
    }

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
