//! An upload: read through the window, hashed as it passes, stored by the
//! host from the bytes it staged.
//!
//! The body is buffered in the instance up to the request's window, as a
//! handler that works on whole bodies does (that growth is what the
//! estimator manages); a longer body streams on through the same buffer,
//! the SHA-256 and the BLAKE3 tree carrying their state from one window to
//! the next. The host keeps its own copy of every chunk, so nothing needs
//! to stay in the instance once it is hashed.
//!
//! A resumable upload is the same loop ([`append`]) over one request's
//! share of the file: it takes up the hashes where the last request left
//! them ([`crate::hashes::HashState`]), hands the host a state to record
//! every `checkpoint_every` bytes, at its end and when its body is cut,
//! and stores the file when the last byte is in.

use crate::hashes::Hashes;
use crate::types::{AppendRequest, FileEnd, FileMeta, HandlerError};
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
/// Bytes kept from the start of a body, to sniff its type from.
const SNIFF_HEAD: usize = 4 << 10;

/// Hash `body` through the window: one request's bytes of a resumable
/// upload, from where `request.resume` left off, recording states on the
/// way, or a whole upload (`FileEnd::BodyEnd`). Store the file if its last
/// byte is in (`request.ends`).
/// `None` when more is to come.
pub async fn append<H: Host>(
    host: &mut H,
    request: AppendRequest,
    body: &H::Upload,
) -> Result<Option<FileMeta>, HandlerError> {
    let window =
        usize::try_from(request.store.window.max(crate::tree::GROUP)).unwrap_or(usize::MAX);
    // The window, as the chunks the host gave: no buffer is ever copied
    // into a larger one, so the instance grows by what it holds and no more.
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut held_bytes = 0;
    // The file's first bytes, to sniff its type from.
    let mut head = request.head;
    let mut hashes = Hashes::<H::Digests>::resume(&request.resume);
    let mut at = request.resume.offset();
    let mut since_checkpoint = 0;
    loop {
        let chunk = match host.read_upload(body, CHUNK).await {
            Ok(chunk) => chunk,
            Err(error) => {
                // Cut off: what arrived before is kept if the upload keeps
                // states; the client is told of the cut either way.
                if request.checkpoint_every > 0 {
                    let _ = checkpoint(host, body, &mut hashes).await;
                }
                return Err(HandlerError::Body(error));
            }
        };
        if chunk.is_empty() {
            break;
        }
        hashes.update(&chunk);
        at += chunk.len() as u64;
        if head.len() < SNIFF_HEAD {
            let take = (SNIFF_HEAD - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
        }
        if hashes.pending_outboard() >= OUTBOARD_PIECE {
            host.keep_outboard(body, &hashes.take_outboard())
                .await
                .map_err(HandlerError::Body)?;
        }
        since_checkpoint += chunk.len() as u64;
        // Never at the last byte: a record of every byte would say the
        // upload is done before its file is stored.
        if request.checkpoint_every > 0
            && since_checkpoint >= request.checkpoint_every
            && request.ends != FileEnd::At(at)
        {
            checkpoint(host, body, &mut hashes).await?;
            since_checkpoint = 0;
        }
        if held_bytes + chunk.len() > window {
            // The window is full and hashed: start it again.
            held.clear();
            held_bytes = 0;
        }
        held_bytes += chunk.len();
        held.push(chunk);
    }
    let last = match request.ends {
        FileEnd::BodyEnd => true,
        FileEnd::At(length) => length == at,
        FileEnd::Later => false,
    };
    if !last {
        checkpoint(host, body, &mut hashes).await?;
        return Ok(None);
    }
    let (sha256, blake3, outboard) = hashes.finish();
    if !outboard.is_empty() {
        host.keep_outboard(body, &outboard)
            .await
            .map_err(HandlerError::Body)?;
    }
    let sha256 = hex(&sha256);
    let blake3 = blake3.to_hex();
    let content_type = match request.store.content_type {
        Some(given) if !given.trim().is_empty() => given,
        _ => sniff::content_type(&head).to_owned(),
    };
    let put = Put {
        sha256: &sha256,
        blake3: &blake3,
        content_type: &content_type,
        overwrite: !request.store.create_only,
    };
    host.put(&request.store.path, body, put)
        .await
        .map(Some)
        .map_err(HandlerError::Volume)
}

/// Hand the host the outboard so far and the state it belongs to.
async fn checkpoint<H: Host>(
    host: &mut H,
    body: &H::Upload,
    hashes: &mut Hashes<H::Digests>,
) -> Result<(), HandlerError> {
    let outboard = hashes.take_outboard();
    if !outboard.is_empty() {
        host.keep_outboard(body, &outboard)
            .await
            .map_err(HandlerError::Body)?;
    }
    host.checkpoint(body, hashes.checkpoint())
        .await
        .map_err(HandlerError::Body)
}
