//! The storage request handler's logic, as a plain library.
//!
//! `storage-guest` compiles it into the Wasm component every pool instance
//! runs; the gateway also compiles it natively (`--handler native`), a
//! measuring instrument that runs the very same logic against the very same
//! host functions without Wasm, so a benchmark can tell what Wasm costs.
//!
//! The handler buffers bodies in memory up to a window (`--body-window`),
//! as real handlers do: inside an instance, that growth of linear memory is
//! what the gateway's estimator manages; past the window it streams. It
//! hashes every upload with SHA-256 (the content's address and ETag) and
//! BLAKE3, whose tree it writes beside the blob as it goes (the two inner
//! loops run by the [`Host`]'s [`digests::Digests`]); it verifies
//! every download against the BLAKE3 recorded at upload, a group of 64 KiB
//! at a time before its bytes leave, so a range reads only the groups it
//! covers. Content stored before the tree was kept is verified whole
//! (SHA-256 for files stored before BLAKE3 was recorded).
//!
//! Layout:
//! - `lib.rs`: the [`Host`] it runs against (the `volume` and `body`
//!   interfaces of `wit/storage.wit`), [`delete`] and [`list`].
//! - [`upload`]: [`append`]: an upload through the window, hashed as it
//!   passes, whole or one request's share of a resumable upload.
//! - [`hashes`]: SHA-256 and the BLAKE3 tree as one stream, whose state a
//!   resumable upload carries from one request to the next.
//! - [`digests`]: the two hashes' inner loops, which the host lends the
//!   guest (the CPU's SHA and vector instructions, which Wasm lacks).
//! - [`download`]: [`Handler::fetch`] and [`Handler::send_body`]: verified
//!   reads, whole or streamed through the window.
//! - [`tree`]: BLAKE3's tree over 64 KiB groups, its outboard and proofs.
//! - `verify`: the checks behind a verified read, as plain functions.
//! - [`types`]: the values that cross the WIT contract, and the macro that
//!   converts them to and from either side's generated bindings.
//! - [`range`]: resolving a client's byte range against the content size.
//! - [`sniff`]: a content type from magic bytes when the client sent none.

pub mod digests;
pub mod download;
pub mod hashes;
pub mod range;
pub mod sniff;
pub mod tree;
pub mod types;
pub mod upload;
mod verify;

pub use download::Handler;
use types::{BodyError, FileMeta, HandlerError, Listing, VolumeError};
pub use upload::{Put, append};

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
    /// Who runs the hashes' inner loops.
    type Digests: digests::Digests;

    /// Up to `max` more bytes of the upload; empty once it has ended.
    async fn read_upload(&mut self, upload: &Self::Upload, max: u32) -> Result<Vec<u8>, BodyError>;
    /// The next bytes of the upload's BLAKE3 outboard ([`tree`]), kept
    /// beside its content.
    async fn keep_outboard(&mut self, upload: &Self::Upload, piece: &[u8])
    -> Result<(), BodyError>;
    /// Record that the upload's bytes up to `state` (and those after it the
    /// host has received) are kept, with the outboard handed over so far:
    /// a resumable upload's point to go on from. Refused when another
    /// request took the upload on meanwhile.
    async fn checkpoint(
        &mut self,
        upload: &Self::Upload,
        state: &hashes::HashState,
    ) -> Result<(), BodyError>;
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
    /// Read `content` from byte `offset` on.
    async fn seek_content(&mut self, content: &Self::Content, offset: u64)
    -> Result<(), BodyError>;
    /// Bytes of the outboard kept beside `content` (0: none).
    async fn outboard_len(&mut self, content: &Self::Content) -> u64;
    /// The outboard's bytes at each `(offset, length)`, one after another.
    async fn read_outboard(
        &mut self,
        content: &Self::Content,
        pieces: &[(u64, u32)],
    ) -> Result<Vec<u8>, BodyError>;
    /// Keep `outboard` beside `content`, stored without one, which was read
    /// whole and verified against the outboard's root.
    async fn attach_outboard(&mut self, content: &Self::Content, outboard: &[u8]);
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

fn hex(digest: &[u8]) -> String {
    let mut hex = String::with_capacity(2 * digest.len());
    for &byte in digest {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `offset` as an index into a buffer in memory (only offsets within one
/// are converted).
fn to_index(offset: u64) -> usize {
    usize::try_from(offset).unwrap_or(usize::MAX)
}

/// True when one of the `If-None-Match` tags names this content.
pub fn etag_matches(tags: &[String], sha256: &str) -> bool {
    tags.iter().any(|tag| tag == "*" || tag == sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_inputs() {
        let sha256_hex = |bytes: &[u8]| hex(&hashes::sha256::<digests::Local>(bytes));
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
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
