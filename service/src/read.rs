//! Reading a file: an instance verifies the content and streams it (whole
//! or a range) to the client a chunk at a time, keeping its lease until the
//! last chunk is out; or answers a conditional or a `HEAD` from the row.

use std::sync::atomic::Ordering;

use axum::body::Body;
use tokio::sync::oneshot;

use volume::{FileMeta, FilePath, Owner};

use crate::ServiceError;
use storage_host::pool::BodySize;
use storage_host::runtime::{
    BodyError, ByteRange, FetchBody, FetchRequest, Fetched, IfRange, paced_body,
};

use super::FileService;

/// What a read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Want {
    /// The metadata and headers only (`HEAD`, `?meta`).
    Headers,
    /// The content, whole or one range of it.
    Content {
        range: Option<ByteRange>,
        /// `If-Range`: the range applies only to the content this names
        /// (checked by the instance against the file it opens); otherwise
        /// the whole content is sent.
        if_range: Option<IfRange>,
    },
}

impl Want {
    /// The whole content, or `range` of it, unconditionally.
    pub fn content(range: Option<ByteRange>) -> Self {
        Self::Content {
            range,
            if_range: None,
        }
    }
}

/// A file as read.
#[derive(Debug)]
pub struct FileRead {
    pub meta: FileMeta,
    pub body: ReadBody,
}

/// What goes with the metadata.
#[derive(Debug)]
pub enum ReadBody {
    /// An entity tag the client named matches.
    NotModified,
    /// Headers only were asked for.
    Headers,
    /// The whole content, verified as it streams.
    Full(Body),
    /// Bytes `first..=last` of it.
    Partial { first: u64, last: u64, body: Body },
}

impl FileService {
    /// Read `owner`'s file `path`; `if_none_match` holds the entity tags
    /// that make the answer "not modified".
    pub async fn read(
        &self,
        owner: Owner,
        path: &FilePath,
        want: Want,
        if_none_match: Vec<String>,
    ) -> Result<FileRead, ServiceError> {
        self.read_looked_up(owner, path, want, if_none_match, None)
            .await
    }

    /// [`FileService::read`], starting from `looked_up`, the row of `path`
    /// the caller read a moment ago ([`FileService::stat`]), if it has one.
    pub async fn read_looked_up(
        &self,
        owner: Owner,
        path: &FilePath,
        want: Want,
        if_none_match: Vec<String>,
        looked_up: Option<FileMeta>,
    ) -> Result<FileRead, ServiceError> {
        let (want_body, range, if_range) = match want {
            Want::Headers => (false, None, None),
            Want::Content { range, if_range } => (true, range, if_range),
        };
        let request = FetchRequest {
            path: path.as_str().to_owned(),
            want_body,
            if_range: if_range.filter(|_| range.is_some()),
            range,
            if_none_match,
            window: self.body_window,
        };
        // The guest holds the file, up to the window, so the request
        // reserves that (a range holds less, but which groups it covers is
        // the guest's to work out); an unknown path reserves nothing and the
        // guest answers 404. The row read here is handed to
        // the call, which starts from it rather than asking the index again.
        let looked_up = match looked_up {
            Some(meta) if want_body => Some(meta),
            _ if want_body => self.volume.stat(owner, path).await.ok(),
            _ => None,
        };
        let body_size = looked_up
            .as_ref()
            .map_or(BodySize::None, |meta| self.body_size(Some(meta.size)));
        let lease = self.pool.lease(body_size).await?;
        let (head, headed) = oneshot::channel();
        let (sink, body) = paced_body(self.pace());
        let failures = self.integrity_failures.clone();
        let answer = lease.spawn(move |instance| {
            Box::pin(async move {
                let fetched = instance.fetch(owner, request, looked_up).await?;
                let streams = matches!(
                    &fetched,
                    Ok(Fetched {
                        body: FetchBody::Full | FetchBody::Partial(_),
                        ..
                    })
                );
                let _ = head.send(fetched);
                if streams {
                    // A client that went away or stalled ends the stream early;
                    // the response then falls short of its Content-Length.
                    match instance.send_body(sink).await? {
                        Ok(()) => {}
                        Err(BodyError::Corrupt(detail)) => {
                            failures.fetch_add(1, Ordering::Relaxed);
                            tracing::error!(%detail, "integrity check failed; the response was cut short");
                        }
                        Err(error) => tracing::debug!(?error, "a response body was cut short"),
                    }
                }
                Ok(())
            })
        });
        match headed.await {
            Ok(Ok(Fetched { meta, body: what })) => {
                let body = match what {
                    FetchBody::NotModified => ReadBody::NotModified,
                    FetchBody::None => ReadBody::Headers,
                    FetchBody::Full => ReadBody::Full(body),
                    FetchBody::Partial((first, last)) => ReadBody::Partial { first, last, body },
                };
                Ok(FileRead { meta, body })
            }
            Ok(Err(error)) => {
                let error = ServiceError::from_handler(error, path.as_str());
                if matches!(error, ServiceError::Integrity(_)) {
                    self.integrity_failures.fetch_add(1, Ordering::Relaxed);
                }
                Err(error)
            }
            // The instance failed before it answered: the answer says why.
            Err(_) => Err(match answer.wait().await {
                Err(error) => error.into(),
                Ok(()) => ServiceError::Internal("the instance gave no answer".into()),
            }),
        }
    }
}
