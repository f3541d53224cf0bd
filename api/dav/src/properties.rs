//! `PROPFIND` and `PROPPATCH`: a resource's live properties (computed from
//! its row and locks) and dead ones (kept by the file service, counted in
//! the quota).
//!
//! A Depth 1 `PROPFIND` of a large folder asking for many properties can
//! make a large answer: it is streamed as the listing is read, a few
//! resources at a time, through the same paced channel as a download, so
//! it holds little memory and a client that stops reading is cut by the
//! same body-rate limit.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use volume::webdav::{DavLock, DeadProperty, FolderMeta, Node, PropertyChange};
use volume::{Entry, FileMeta, Owner, Prefix};

use api_common::ApiError;
use api_common::body::read_small_body;
use api_common::headers::{http_date, rfc3339};
use file_service::{Change, FileService};
use storage_host::runtime::{PacedSender, paced_body};

use super::content::LISTING_PAGE;
use super::target::{Target, href, key_of};
use super::xml::{self, DAV, Document, PropName, Propfind};
use super::{Dav, MAX_XML_BODY, Stopped, xml_answer};

/// Resources whose dead properties are read together (at most 256 values
/// of 16 KiB each per resource).
const RESOURCES_PER_PART: usize = 16;

/// A streamed multistatus is sent whenever this much of it is written.
const PART_BYTES: usize = 256 * 1024;

/// What every part of one `PROPFIND` answer describes against.
struct Asked {
    owner: Owner,
    asked: Propfind,
    locks: Vec<DavLock>,
    /// The locks' holders, by token.
    holders: HashMap<String, String>,
}

impl Dav<'_> {
    pub(super) async fn propfind(&self, target: &Target, body: Body) -> Result<Response, ApiError> {
        let depth_one = match self.headers.get("depth").map(HeaderValue::as_bytes) {
            Some(b"0") => false,
            Some(b"1") => true,
            _ => return Ok(finite_depth_only()),
        };
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let asked = xml::parse_propfind(&body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let node = self.node(target).await?;
        if matches!(node, Node::Missing) {
            return Err(ApiError::NotFound(target.shown()));
        }
        let files = &self.state.files;
        let locks = files.locks(self.owner).await?;
        let holders = if locks.is_empty() {
            HashMap::new()
        } else {
            files.lock_holders(self.owner).await?
        };
        let asked = Arc::new(Asked {
            owner: self.owner,
            asked,
            locks,
            holders,
        });
        // The resource itself is described before the answer is committed
        // to 207, so what fails here still gets its own status.
        let key = key_of(&node, target);
        let mut document = Document::new("multistatus");
        describe(
            files,
            &asked,
            &mut document,
            vec![(key, node.clone())],
            None,
        )
        .await
        .map_err(|stopped| match stopped {
            Stopped::Failed(error) => error,
            Stopped::Cut(cut) => ApiError::Internal(cut.to_string()),
        })?;
        let first = document.take();
        let folder = match (depth_one, node) {
            (true, Node::Folder(folder)) => Some(folder.prefix),
            _ => None,
        };
        let (mut sender, answer) = paced_body(files.pace());
        let files = files.clone();
        tokio::spawn(async move {
            let streamed = async {
                send(&mut sender, first).await?;
                if let Some(prefix) = folder {
                    stream_members(&files, &asked, &prefix, &mut document, &mut sender).await?;
                }
                send(&mut sender, document.finish("multistatus")).await
            };
            if let Err(error) = streamed.await {
                tracing::debug!(%error, "a PROPFIND answer was cut short");
                sender.abort();
            }
        });
        Ok((
            StatusCode::MULTI_STATUS,
            [(header::CONTENT_TYPE, "application/xml; charset=utf-8")],
            answer,
        )
            .into_response())
    }

    pub(super) async fn proppatch(
        &self,
        target: &Target,
        body: Body,
    ) -> Result<Response, ApiError> {
        let body = read_small_body(body, MAX_XML_BODY).await?;
        let changes =
            xml::parse_proppatch(&body).map_err(|e| ApiError::BadRequest(e.to_string()))?;
        let node = self.node(target).await?;
        if matches!(node, Node::Missing) {
            return Err(ApiError::NotFound(target.shown()));
        }
        let key = key_of(&node, target);
        let tokens = self.preconditions(target, &node).await?;
        // A locked resource answers 423 whatever the body names.
        self.state
            .files
            .check_locks(self.owner, &tokens, &[Change::One(&key)])
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
                .files
                .change_properties(self.owner, &key, &changes, &tokens)
                .await?;
            propstat(&mut document, &free, "HTTP/1.1 200 OK");
        } else {
            propstat(&mut document, &protected, "HTTP/1.1 403 Forbidden");
            propstat(&mut document, &free, "HTTP/1.1 424 Failed Dependency");
        }
        document.close("response");
        Ok(xml_answer(
            StatusCode::MULTI_STATUS,
            document.finish("multistatus"),
        ))
    }
}

async fn send(sender: &mut PacedSender, bytes: Vec<u8>) -> Result<(), Stopped> {
    Ok(sender.send(Bytes::from(bytes)).await?)
}

/// Describe every member of the folder `prefix`, a page of the listing and
/// a few resources at a time, sending each part as it is written.
async fn stream_members(
    files: &FileService,
    asked: &Asked,
    prefix: &Prefix,
    document: &mut Document,
    sender: &mut PacedSender,
) -> Result<(), Stopped> {
    let mut after: Option<String> = None;
    loop {
        let page = files
            .list_page(asked.owner, prefix, after.as_deref(), LISTING_PAGE)
            .await?;
        let mut members = Vec::with_capacity(page.entries.len());
        for entry in page.entries {
            members.push(match entry {
                Entry::File(meta) => (meta.path.clone(), Node::File(meta)),
                Entry::Folder(path) => {
                    let prefix = Prefix::parse(&path).map_err(ApiError::from)?;
                    (
                        path,
                        Node::Folder(FolderMeta {
                            prefix,
                            created_ms: None,
                        }),
                    )
                }
            });
        }
        let mut members = members.into_iter().peekable();
        while members.peek().is_some() {
            let part: Vec<(String, Node)> = members.by_ref().take(RESOURCES_PER_PART).collect();
            describe(files, asked, document, part, Some(&mut *sender)).await?;
        }
        match page.next_after {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

/// Write the `response` elements of `resources` (key and node) into
/// `document`, with their dead properties and, for folders known only by
/// name, the date they were made; with a `sender`, send what is written
/// whenever it reaches [`PART_BYTES`], and at the end.
async fn describe(
    files: &FileService,
    asked: &Asked,
    document: &mut Document,
    mut resources: Vec<(String, Node)>,
    mut sender: Option<&mut PacedSender>,
) -> Result<(), Stopped> {
    let keys: Vec<String> = resources.iter().map(|(key, _)| key.clone()).collect();
    let unnamed: Vec<String> = resources
        .iter()
        .filter(|(_, node)| {
            matches!(
                node,
                Node::Folder(FolderMeta {
                    created_ms: None,
                    ..
                })
            )
        })
        .map(|(key, _)| key.clone())
        .collect();
    if !unnamed.is_empty() {
        let made = files.folders_made(asked.owner, &unnamed).await?;
        for (key, node) in &mut resources {
            if let Node::Folder(folder) = node
                && folder.created_ms.is_none()
            {
                folder.created_ms = made.get(key.as_str()).copied();
            }
        }
    }
    let dead = files.properties_of(asked.owner, &keys).await?;
    for (key, node) in &resources {
        let properties = dead.get(key).map(Vec::as_slice).unwrap_or_default();
        let resource = Resource {
            key,
            node,
            dead: properties,
            locks: &asked.locks,
            holders: &asked.holders,
        };
        resource.describe(document, &asked.asked);
        if let Some(sender) = sender.as_deref_mut()
            && document.written() >= PART_BYTES
        {
            send(sender, document.take()).await?;
        }
    }
    if let Some(sender) = sender {
        send(sender, document.take()).await?;
    }
    Ok(())
}

/// 403 for a `PROPFIND` of unbounded depth (RFC 4918 §9.1).
fn finite_depth_only() -> Response {
    let mut document = Document::new("error");
    document.empty("propfind-finite-depth");
    xml_answer(StatusCode::FORBIDDEN, document.finish("error"))
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
pub(super) struct Resource<'a> {
    key: &'a str,
    node: &'a Node,
    dead: &'a [DeadProperty],
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
                    super::locking::active_lock(document, lock, holder);
                }
                document.close("lockdiscovery");
                return;
            }
            "displayname" => {
                let trimmed = self.key.trim_end_matches('/');
                trimmed.rsplit('/').next().unwrap_or_default().to_owned()
            }
            "creationdate" => rfc3339(self.created_ms().unwrap_or_default()),
            "getlastmodified" => http_date(self.modified_ms().unwrap_or_default()),
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
