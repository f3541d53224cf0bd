//! An upload: read through the window, hashed as it passes, stored by the
//! host from the bytes it staged.
//!
//! The body is buffered in the instance up to the request's window, as a
//! handler that works on whole bodies does (that growth is what the
//! estimator manages); a longer body streams on through the same buffer,
//! the SHA-256 and the BLAKE3 tree carrying their state from one window to
//! the next. The host keeps its own copy of every chunk, so nothing needs
//! to stay in the instance once it is hashed.

use sha2::{Digest as _, Sha256};

use crate::tree::{GROUP, TreeWriter};
use crate::types::{FileMeta, HandlerError, StoreRequest};
use crate::{CHUNK, Host, hex, sniff};

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

/// Outboard bytes handed to the host at a time.
const OUTBOARD_PIECE: usize = 64 << 10;
/// Bytes kept from the start of a body longer than the window, to sniff its
/// type from.
const SNIFF_HEAD: usize = 4 << 10;

/// Read `body` to its end through the window, hash it, and store it.
pub async fn put<H: Host>(
    host: &mut H,
    request: StoreRequest,
    body: &H::Upload,
) -> Result<FileMeta, HandlerError> {
    let window = usize::try_from(request.window.max(GROUP)).unwrap_or(usize::MAX);
    // The window, as the chunks the host gave: no buffer is ever copied
    // into a larger one, so the instance grows by what it holds and no more.
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut held_bytes = 0;
    // The body's first bytes, to sniff its type from.
    let mut head: Option<Vec<u8>> = None;
    let mut sha256 = Sha256::new();
    let mut tree = TreeWriter::new();
    loop {
        let chunk = host
            .read_upload(body, CHUNK)
            .await
            .map_err(HandlerError::Body)?;
        if chunk.is_empty() {
            break;
        }
        sha256.update(&chunk);
        tree.update(&chunk);
        if tree.pending_outboard() >= OUTBOARD_PIECE {
            host.keep_outboard(body, &tree.take_outboard())
                .await
                .map_err(HandlerError::Body)?;
        }
        // The host reads up to the chunk size unless the body ends, so the
        // first chunk holds the first bytes there are.
        head.get_or_insert_with(|| chunk[..chunk.len().min(SNIFF_HEAD)].to_vec());
        if held_bytes + chunk.len() > window {
            // The window is full and hashed: start it again.
            held.clear();
            held_bytes = 0;
        }
        held_bytes += chunk.len();
        held.push(chunk);
    }
    let sha256 = hex(&sha256.finalize());
    let (blake3, outboard) = tree.finish();
    if !outboard.is_empty() {
        host.keep_outboard(body, &outboard)
            .await
            .map_err(HandlerError::Body)?;
    }
    let blake3 = blake3.to_hex();
    let content_type = match request.content_type {
        Some(given) if !given.trim().is_empty() => given,
        _ => sniff::content_type(head.as_deref().unwrap_or_default()).to_owned(),
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
