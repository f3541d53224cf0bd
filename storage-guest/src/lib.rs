//! The storage request handler, compiled for `wasm32-wasip2` into a component.
//!
//! Every instance of this component is long-lived and serves one request at a
//! time. It buffers whole bodies in its own linear memory, as real handlers
//! do: that memory never shrinks, which is what the gateway's estimator keeps
//! in check. It hashes every upload with SHA-256 (the content's address and
//! ETag) and BLAKE3, and verifies every download against the BLAKE3 recorded
//! at upload (SHA-256 for files stored before it was), refusing to return
//! content whose digest does not match the index. BLAKE3 is built with Wasm
//! SIMD (the gateway's build script enables `simd128`): verifying a MiB costs
//! a fraction of what SHA-256 does inside the instance.
//!
//! Layout:
//! - `lib.rs`: the exported `handler` interface (put, fetch, send-body,
//!   delete, list). Bodies come in and go out through the host's `body`
//!   resources a chunk at a time; the whole body still sits in this
//!   instance's memory while it is hashed or verified.
//! - [`range`]: resolving a client's byte range against the content size.
//! - [`sniff`]: a content type from magic bytes when the client sent none.
//!
//! The contract is `wit/storage.wit`; the gateway builds this crate with
//! `cargo build --target wasm32-wasip2` from its build script.

// `generate!` and `export!` expand to the canonical-ABI glue, which is unsafe
// by nature; the handler code below uses none of its own.
#![allow(unsafe_code)]

pub mod range;
pub mod sniff;

wit_bindgen::generate!({ world: "storage", path: "../wit" });

use std::cell::RefCell;

use exports::wasm_storage::storage::handler::{
    FetchBody, FetchRequest, Fetched, Guest, HandlerError, StoreRequest,
};
use sha2::{Digest, Sha256};
use wasm_storage::storage::body::{BodyError, Response, Upload};
use wasm_storage::storage::types::{FileMeta, Listing};
use wasm_storage::storage::volume;

/// Bytes asked of the host per body read, and sent per response write.
const CHUNK: u32 = 256 << 10;

thread_local! {
    /// The verified content `fetch` prepared for `send-body`, and the part
    /// of it to send.
    static PREPARED: RefCell<Option<Prepared>> = const { RefCell::new(None) };
}

struct Prepared {
    content: Vec<u8>,
    first: usize,
    /// Exclusive.
    end: usize,
}

struct StorageHandler;

impl Guest for StorageHandler {
    fn put(request: StoreRequest, body: &Upload) -> Result<FileMeta, HandlerError> {
        // The whole body is buffered here, as real handlers do: this growth
        // of linear memory is what the gateway's estimator manages. A
        // declared length lets the buffer be sized once.
        let mut content = match body.declared_length() {
            Some(length) => Vec::with_capacity(to_index(length)),
            None => Vec::new(),
        };
        let mut hasher = Sha256::new();
        let mut verifier = blake3::Hasher::new();
        loop {
            let chunk = body.read(CHUNK).map_err(HandlerError::Body)?;
            if chunk.is_empty() {
                break;
            }
            hasher.update(&chunk);
            verifier.update(&chunk);
            content.extend_from_slice(&chunk);
        }
        let digest = hex(&hasher.finalize());
        let check = verifier.finalize().to_hex();
        let content_type = match request.content_type {
            Some(given) if !given.trim().is_empty() => given,
            _ => sniff::content_type(&content).to_owned(),
        };
        volume::put(
            &request.path,
            body,
            &digest,
            &check,
            &content_type,
            !request.create_only,
        )
        .map_err(HandlerError::Volume)
    }

    fn fetch(request: FetchRequest) -> Result<Fetched, HandlerError> {
        PREPARED.with_borrow_mut(|prepared| *prepared = None);
        // Conditional and metadata-only requests are answered from the index
        // without reading (and buffering) the content.
        if !request.want_body || !request.if_none_match.is_empty() {
            let meta = volume::stat(&request.path).map_err(HandlerError::Volume)?;
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

        let (meta, reader) = volume::open(&request.path).map_err(HandlerError::Volume)?;
        // The whole content, even for a range: it is verified as a whole.
        let mut content = Vec::with_capacity(to_index(meta.size));
        loop {
            let chunk = reader.read(CHUNK).map_err(HandlerError::Body)?;
            if chunk.is_empty() {
                break;
            }
            content.extend_from_slice(&chunk);
        }
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
        PREPARED.with_borrow_mut(|prepared| {
            *prepared = Some(Prepared {
                content,
                first,
                end,
            });
        });
        Ok(Fetched { meta, body })
    }

    fn send_body(out: &Response) -> Result<(), BodyError> {
        let Some(prepared) = PREPARED.with_borrow_mut(Option::take) else {
            return Ok(());
        };
        for chunk in prepared.content[prepared.first..prepared.end].chunks(to_index(CHUNK.into())) {
            out.write(chunk)?;
        }
        Ok(())
    }

    fn delete(path: String) -> Result<(), HandlerError> {
        volume::delete(&path).map_err(HandlerError::Volume)
    }

    fn list(prefix: String, after: Option<String>, limit: u32) -> Result<Listing, HandlerError> {
        volume::list(&prefix, after.as_deref(), limit).map_err(HandlerError::Volume)
    }
}

// The component's exports only exist in the wasm build; on the host this
// crate compiles for its unit tests and lints.
#[cfg(target_arch = "wasm32")]
export!(StorageHandler);

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
    // Content lives in this instance's memory, so every valid offset fits.
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
