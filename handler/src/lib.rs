//! The storage request handler's logic, as a plain library.
//!
//! `storage-guest` compiles it into the Wasm component every pool instance
//! runs; the gateway also compiles it natively (`--handler native`), a
//! measuring instrument that runs the very same logic against the very same
//! host functions without Wasm, so a benchmark can tell what Wasm costs.
//!
//! The handler buffers whole bodies in memory, as real handlers do (inside an
//! instance, that growth of linear memory is what the gateway's estimator
//! manages). It hashes every upload with SHA-256 (the content's address and
//! ETag) and BLAKE3, and verifies every download against the BLAKE3 recorded
//! at upload (SHA-256 for files stored before it was), refusing to return
//! content whose digest does not match the index.
//!
//! Layout:
//! - `lib.rs`: the [`Host`] it runs against (the `volume` and `body`
//!   interfaces of `wit/storage.wit`) and the handler: [`put`],
//!   [`Handler::fetch`], [`Handler::send_body`], [`delete`], [`list`].
//! - [`types`]: the values that cross the WIT contract, and the macro that
//!   converts them to and from either side's generated bindings.
//! - [`range`]: resolving a client's byte range against the content size.
//! - [`sniff`]: a content type from magic bytes when the client sent none.

pub mod range;
pub mod sniff;
pub mod types;

use sha2::{Digest as _, Sha256};

use types::{
    BodyError, FetchBody, FetchRequest, Fetched, FileMeta, HandlerError, Listing, StoreRequest,
    VolumeError,
};

/// Bytes asked of the host per body read, and sent per response write.
pub const CHUNK: u32 = 256 << 10;

/// What the handler needs from whoever runs it: the `volume` and `body`
/// imports of `wit/storage.wit`. In the guest these are synchronous calls
/// out of the instance; natively they are the gateway's async host
/// functions themselves.
// Callers use concrete hosts (never `dyn`, never generic over `Send`), so
// the futures' auto traits are known where they are spawned.
#[allow(async_fn_in_trait)]
pub trait Host {
    /// An upload's body, still on the client's socket.
    type Upload;
    /// A stored file's content being read.
    type Content;
    /// The response body on its way to the client.
    type Response;

    async fn declared_length(&mut self, upload: &Self::Upload) -> Option<u64>;
    /// Up to `max` more bytes of the upload; empty once it has ended.
    async fn read_upload(&mut self, upload: &Self::Upload, max: u32) -> Result<Vec<u8>, BodyError>;
    /// Store the upload, read to its end, whose digests are given.
    async fn put(
        &mut self,
        path: &str,
        upload: &Self::Upload,
        put: Put<'_>,
    ) -> Result<FileMeta, VolumeError>;
    async fn stat(&mut self, path: &str) -> Result<FileMeta, VolumeError>;
    async fn open(&mut self, path: &str) -> Result<(FileMeta, Self::Content), VolumeError>;
    /// Up to `max` more bytes of the content; empty at its end.
    async fn read_content(
        &mut self,
        content: &Self::Content,
        max: u32,
    ) -> Result<Vec<u8>, BodyError>;
    /// Done with `content`.
    async fn close_content(&mut self, content: Self::Content);
    async fn write(&mut self, out: &Self::Response, chunk: &[u8]) -> Result<(), BodyError>;
    async fn delete(&mut self, path: &str) -> Result<(), VolumeError>;
    async fn list(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Listing, VolumeError>;
}

/// What `volume.put` is told besides the path and the body.
#[derive(Debug, Clone, Copy)]
pub struct Put<'a> {
    /// Lowercase hex SHA-256 of the body.
    pub sha256: &'a str,
    /// Lowercase hex BLAKE3 of the body.
    pub blake3: &'a str,
    pub content_type: &'a str,
    pub overwrite: bool,
}

/// Read `body` to its end, hash it, and store it.
pub async fn put<H: Host>(
    host: &mut H,
    request: StoreRequest,
    body: &H::Upload,
) -> Result<FileMeta, HandlerError> {
    // The whole body is buffered here, as real handlers do. A declared
    // length lets the buffer be sized once.
    let mut content = match host.declared_length(body).await {
        Some(length) => Vec::with_capacity(to_index(length)),
        None => Vec::new(),
    };
    let mut hasher = Sha256::new();
    let mut verifier = blake3::Hasher::new();
    loop {
        let chunk = host
            .read_upload(body, CHUNK)
            .await
            .map_err(HandlerError::Body)?;
        if chunk.is_empty() {
            break;
        }
        hasher.update(&chunk);
        verifier.update(&chunk);
        content.extend_from_slice(&chunk);
    }
    let sha256 = hex(&hasher.finalize());
    let blake3 = verifier.finalize().to_hex();
    let content_type = match request.content_type {
        Some(given) if !given.trim().is_empty() => given,
        _ => sniff::content_type(&content).to_owned(),
    };
    let put = Put {
        sha256: &sha256,
        blake3: &blake3,
        content_type: &content_type,
        overwrite: !request.create_only,
    };
    host.put(&request.path, body, put)
        .await
        .map_err(HandlerError::Volume)
}

pub async fn delete<H: Host>(host: &mut H, path: &str) -> Result<(), HandlerError> {
    host.delete(path).await.map_err(HandlerError::Volume)
}

pub async fn list<H: Host>(
    host: &mut H,
    prefix: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Listing, HandlerError> {
    host.list(prefix, after, limit)
        .await
        .map_err(HandlerError::Volume)
}

/// The handler's state between `fetch` and `send-body`: the verified
/// content `fetch` prepared, waiting to be sent.
#[derive(Debug, Default)]
pub struct Handler {
    prepared: Option<Prepared>,
}

#[derive(Debug)]
struct Prepared {
    content: Vec<u8>,
    first: usize,
    /// Exclusive.
    end: usize,
}

impl Handler {
    /// Answer a read: from metadata alone, or by reading and verifying the
    /// whole content, which then waits here for [`Handler::send_body`].
    pub async fn fetch<H: Host>(
        &mut self,
        host: &mut H,
        request: FetchRequest,
    ) -> Result<Fetched, HandlerError> {
        self.prepared = None;
        // Conditional and metadata-only requests are answered from the index
        // without reading (and buffering) the content.
        if !request.want_body || !request.if_none_match.is_empty() {
            let meta = host
                .stat(&request.path)
                .await
                .map_err(HandlerError::Volume)?;
            if etag_matches(&request.if_none_match, &meta.sha256) {
                return Ok(Fetched {
                    meta,
                    body: FetchBody::NotModified,
                });
            }
            if !request.want_body {
                return Ok(Fetched {
                    meta,
                    body: FetchBody::None,
                });
            }
        }

        let (meta, reader) = host
            .open(&request.path)
            .await
            .map_err(HandlerError::Volume)?;
        // The whole content, even for a range: it is verified as a whole.
        let mut content = Vec::with_capacity(to_index(meta.size));
        let read = loop {
            match host.read_content(&reader, CHUNK).await {
                Ok(chunk) if chunk.is_empty() => break Ok(()),
                Ok(chunk) => content.extend_from_slice(&chunk),
                Err(error) => break Err(HandlerError::Body(error)),
            }
        };
        host.close_content(reader).await;
        read?;
        verify(&meta, &content)?;

        let (body, first, end) = match request.range {
            None => (FetchBody::Full, 0, content.len()),
            Some(asked) => {
                let (first, last) = range::resolve(asked, meta.size)
                    .ok_or(HandlerError::RangeNotSatisfiable(meta.size))?;
                (
                    FetchBody::Partial((first, last)),
                    to_index(first),
                    to_index(last) + 1,
                )
            }
        };
        self.prepared = Some(Prepared {
            content,
            first,
            end,
        });
        Ok(Fetched { meta, body })
    }

    /// Stream what the last `fetch` prepared to `out`, then forget it.
    /// Without a prepared body, sends nothing.
    pub async fn send_body<H: Host>(
        &mut self,
        host: &mut H,
        out: &H::Response,
    ) -> Result<(), BodyError> {
        let Some(prepared) = self.prepared.take() else {
            return Ok(());
        };
        for chunk in prepared.content[prepared.first..prepared.end].chunks(to_index(CHUNK.into())) {
            host.write(out, chunk).await?;
        }
        Ok(())
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    let mut hex = String::with_capacity(2 * digest.len());
    for &byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// True when one of the `If-None-Match` tags names this content.
pub fn etag_matches(tags: &[String], sha256: &str) -> bool {
    tags.iter().any(|tag| tag == "*" || tag == sha256)
}

fn verify(meta: &FileMeta, content: &[u8]) -> Result<(), HandlerError> {
    if content.len() as u64 != meta.size {
        return Err(HandlerError::Integrity(format!(
            "{}: stored content is {} bytes, the index says {}",
            meta.path,
            content.len(),
            meta.size
        )));
    }
    let (actual, recorded) = match &meta.blake3 {
        Some(recorded) => (blake3::hash(content).to_hex().to_string(), recorded),
        None => (sha256_hex(content), &meta.sha256),
    };
    if actual != *recorded {
        return Err(HandlerError::Integrity(format!(
            "{}: stored content hashes to {actual}, the index says {recorded}",
            meta.path
        )));
    }
    Ok(())
}

fn to_index(offset: u64) -> usize {
    // Content lives in the handler's memory, so every valid offset fits.
    usize::try_from(offset).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_inputs() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    fn meta(content: &[u8], blake3: Option<String>) -> FileMeta {
        FileMeta {
            path: "f".into(),
            size: content.len() as u64,
            sha256: sha256_hex(content),
            blake3,
            content_type: "text/plain".into(),
            created_ms: 0,
            modified_ms: 0,
        }
    }

    #[test]
    fn downloads_are_verified_by_blake3_else_sha256() {
        let content = b"stored bytes";
        let recorded = Some(blake3::hash(content).to_hex().to_string());
        assert!(verify(&meta(content, recorded.clone()), content).is_ok());
        assert!(verify(&meta(content, None), content).is_ok());
        let corrupt = b"stored bytez";
        assert!(verify(&meta(content, recorded), corrupt).is_err());
        assert!(verify(&meta(content, None), corrupt).is_err());
        let wrong = Some(blake3::hash(b"other").to_hex().to_string());
        assert!(verify(&meta(content, wrong), content).is_err());
    }

    #[test]
    fn etag_matching() {
        let tags = vec!["aa".to_owned(), "bb".to_owned()];
        assert!(etag_matches(&tags, "bb"));
        assert!(!etag_matches(&tags, "cc"));
        assert!(etag_matches(&["*".to_owned()], "cc"));
        assert!(!etag_matches(&[], "cc"));
    }
}
