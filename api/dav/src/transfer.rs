//! `COPY` and `MOVE`: rows, never bytes (content is addressed by its
//! digest), whole trees in one transaction.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use volume::webdav::{Depth, Node, Transfer};

use api_common::ApiError;
use file_service::TransferRequest;

use super::target::{Target, destination, href, key_of};
use super::{Dav, Verb};

impl Dav<'_> {
    pub(super) async fn transfer(&self, target: &Target, verb: Verb) -> Result<Response, ApiError> {
        let copy = verb == Verb::Copy;
        let named = self
            .headers
            .get("destination")
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| ApiError::BadRequest("a Destination header is needed".into()))?;
        let to = destination(named, self.headers)?;
        let (Some(from_name), Some(to_name)) = (&target.name, &to.name) else {
            return Err(ApiError::Forbidden(
                "the root collection cannot be copied, moved or replaced".into(),
            ));
        };
        let node = self.node(target).await?;
        let folder = match node {
            Node::Missing => return Err(ApiError::NotFound(target.shown())),
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
                return Err(ApiError::BadRequest(if copy {
                    "COPY of a collection takes Depth 0 or infinity".into()
                } else {
                    "MOVE of a collection takes Depth infinity".into()
                }));
            }
        };
        let overwrite = match self.headers.get("overwrite").map(HeaderValue::as_bytes) {
            None | Some(b"T" | b"t") => true,
            Some(b"F" | b"f") => false,
            _ => return Err(ApiError::BadRequest("Overwrite is T or F".into())),
        };
        if !self.parent_exists(&to).await? {
            return Err(ApiError::Conflict(format!(
                "the collection {to_name} would be in does not exist"
            )));
        }
        let to_node = self.node(&to).await?;
        let (from_key, to_key) = (key_of(&node, target), key_of(&to_node, &to));
        let tokens = self.preconditions(target, &node).await?;
        let request = TransferRequest {
            from: from_name,
            from_key: &from_key,
            to: to_name,
            to_key: &to_key,
            depth,
            overwrite,
        };
        match self
            .state
            .files
            .transfer(self.owner, request, !copy, &tokens)
            .await?
        {
            Transfer::Created => {
                let created = if folder {
                    format!("{}/", to_name.as_str())
                } else {
                    to_name.as_str().to_owned()
                };
                let location = HeaderValue::from_str(&href(&created))
                    .map_err(|error| ApiError::Internal(error.to_string()))?;
                Ok((StatusCode::CREATED, [(header::LOCATION, location)]).into_response())
            }
            Transfer::Replaced => Ok(StatusCode::NO_CONTENT.into_response()),
        }
    }
}
