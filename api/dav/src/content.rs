//! `GET`, `HEAD`, `PUT`, `DELETE` and `MKCOL`: files through the file
//! service (read and stored by instances), folders as rows.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use volume::webdav::Node;
use volume::{FilePath, Prefix};

use api_common::ApiError;
use api_common::answer::file_response;
use api_common::body::read_small_body;
use api_common::headers::{content_wanted, parse_if_none_match, store_options};
use file_service::Want;
use storage_host::runtime::paced_body;

use super::target::{Target, href};
use super::{Dav, MAX_XML_BODY, Read, Stopped};
use quick_xml::escape::escape;

/// Entries read per index page while listing a collection.
pub(super) const LISTING_PAGE: u32 = 1000;

impl Dav<'_> {
    pub(super) async fn get(&self, target: &Target, read: Read) -> Result<Response, ApiError> {
        match self.node(target).await? {
            Node::File(meta) => {
                let path = FilePath::parse(&meta.path)?;
                let want = match read {
                    Read::Content => content_wanted(self.headers),
                    Read::Headers => Want::Headers,
                };
                let read = self
                    .state
                    .files
                    .read(self.owner, &path, want, parse_if_none_match(self.headers))
                    .await?;
                Ok(file_response(read))
            }
            Node::Folder(folder) => self.folder_page(&folder.prefix, read).await,
            Node::Missing => Err(ApiError::NotFound(target.shown())),
        }
    }

    /// A collection's `GET`: a plain HTML list of what it holds, streamed
    /// a page of the listing at a time (through the paced channel a
    /// download takes, so a reader that stops is cut).
    async fn folder_page(&self, prefix: &Prefix, read: Read) -> Result<Response, ApiError> {
        let headers = [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
        ];
        if read == Read::Headers {
            return Ok((StatusCode::OK, headers).into_response());
        }
        let head = format!(
            "<!doctype html><meta charset=\"utf-8\"><title>{0}</title><h1>{0}</h1><ul>",
            escape(href(prefix.as_str()))
        );
        let (mut sender, page) = paced_body(self.state.files.pace());
        let (files, owner, prefix) = (self.state.files.clone(), self.owner, prefix.clone());
        tokio::spawn(async move {
            let streamed = async {
                sender.send(Bytes::from(head)).await?;
                let mut after: Option<String> = None;
                loop {
                    let listing = files
                        .list_page(owner, &prefix, after.as_deref(), LISTING_PAGE)
                        .await?;
                    let mut part = String::new();
                    for entry in &listing.entries {
                        let name = &entry.name()[prefix.as_str().len()..];
                        part.push_str(&format!(
                            "<li><a href=\"{}\">{}</a></li>",
                            escape(href(entry.name())),
                            escape(name)
                        ));
                    }
                    sender.send(Bytes::from(part)).await?;
                    match listing.next_after {
                        Some(next) => after = Some(next),
                        None => break,
                    }
                }
                sender.send(Bytes::from_static(b"</ul>")).await?;
                Ok::<_, Stopped>(())
            };
            if let Err(error) = streamed.await {
                tracing::debug!(%error, "a folder page was cut short");
                sender.abort();
            }
        });
        Ok((StatusCode::OK, headers, page).into_response())
    }

    pub(super) async fn put(&self, target: &Target, body: Body) -> Result<Response, ApiError> {
        let Some(name) = &target.name else {
            return Err(ApiError::MethodNotAllowed(
                "the root collection cannot be replaced by a file".into(),
            ));
        };
        let node = self.node(target).await?;
        if matches!(node, Node::Folder(_)) {
            return Err(ApiError::MethodNotAllowed(format!(
                "{name} is a collection; PUT stores files"
            )));
        }
        if !self.parent_exists(target).await? {
            return Err(ApiError::Conflict(format!(
                "the collection {name} would be in does not exist (MKCOL it first)"
            )));
        }
        let tokens = self.preconditions(target, &node).await?;
        let options = store_options(self.headers);
        let meta = self
            .state
            .files
            .store(self.caller, name, body, options, &tokens)
            .await?;
        let status = if matches!(node, Node::Missing) {
            StatusCode::CREATED
        } else {
            StatusCode::NO_CONTENT
        };
        let etag = HeaderValue::from_str(&format!("\"{}\"", meta.sha256))
            .map_err(|error| ApiError::Internal(error.to_string()))?;
        Ok((status, [(header::ETAG, etag)]).into_response())
    }

    pub(super) async fn delete(&self, target: &Target) -> Result<Response, ApiError> {
        let node = self.node(target).await?;
        match &node {
            Node::Missing => return Err(ApiError::NotFound(target.shown())),
            Node::Folder(_) if target.name.is_none() => {
                return Err(ApiError::Forbidden(
                    "the root collection cannot be deleted".into(),
                ));
            }
            _ => {}
        }
        let tokens = self.preconditions(target, &node).await?;
        match node {
            Node::File(meta) => {
                let path = FilePath::parse(&meta.path)?;
                self.state
                    .files
                    .delete_file(self.owner, &path, &tokens)
                    .await?;
            }
            Node::Folder(folder) => {
                self.state
                    .files
                    .delete_folder(self.owner, &folder.prefix, &tokens)
                    .await?;
            }
            Node::Missing => {}
        }
        Ok(StatusCode::NO_CONTENT.into_response())
    }

    pub(super) async fn mkcol(&self, target: &Target, body: Body) -> Result<Response, ApiError> {
        if !read_small_body(body, MAX_XML_BODY).await?.is_empty() {
            return Err(ApiError::UnsupportedMediaType(
                "MKCOL takes no body here".into(),
            ));
        }
        let Some(name) = &target.name else {
            return Err(ApiError::MethodNotAllowed(
                "the root collection exists".into(),
            ));
        };
        let node = self.node(target).await?;
        if !matches!(node, Node::Missing) {
            return Err(ApiError::MethodNotAllowed(format!("{name} exists")));
        }
        if !self.parent_exists(target).await? {
            return Err(ApiError::Conflict(format!(
                "the collection {name} would be in does not exist"
            )));
        }
        let tokens = self.preconditions(target, &node).await?;
        let folder = Prefix::parse(name.as_str())?;
        self.state
            .files
            .make_folder(self.owner, &folder, &tokens)
            .await?;
        // What a vanished resource left at this name is not the new
        // folder's: dropped once the locks let the folder be made.
        self.state.files.forget(self.owner, folder.as_str()).await?;
        Ok(StatusCode::CREATED.into_response())
    }
}
