//! A read: answered from the index, or with content verified before a byte
//! of it leaves the instance.
//!
//! Content with an outboard (every upload since the tree is kept, more than
//! one 64 KiB group) is read a batch of groups at a time, at most the
//! request's window: the batch's part of the tree is proved against the
//! recorded BLAKE3, then each group's bytes against its leaf. [`Handler::fetch`]
//! verifies the first batch, so a range within the window that covers a
//! damaged group fails with `integrity` before any byte is sent;
//! [`Handler::send_body`] sends it and streams the rest, and a damaged group
//! there ends the response early (the client sees a truncated body, never
//! wrong bytes). A range reads only the groups it covers.
//!
//! Content without an outboard (one group, or stored before the tree was
//! kept) is read and verified whole, as before; content stored before the
//! tree was kept gets its outboard then, computed as it is verified and
//! handed to the host to keep, so its later reads stream.

use crate::tree::{GROUP, Node, Shape, TreeWriter};
use crate::types::{BodyError, FetchBody, FetchRequest, Fetched, FileMeta, HandlerError};
use crate::verify::{coalesce, first_unlike, hashes_unlike, verify_whole};
use crate::{CHUNK, Host, range, to_index};

/// The handler's state between `fetch` and `send-body`: the verified bytes
/// `fetch` prepared, and the content still to stream.
#[derive(Debug)]
pub struct Handler<C> {
    prepared: Option<Prepared<C>>,
}

impl<C> Default for Handler<C> {
    fn default() -> Self {
        Self { prepared: None }
    }
}

#[derive(Debug)]
struct Prepared<C> {
    /// Verified bytes, to be sent first.
    batch: Batch,
    /// The groups after those, to verify and send.
    rest: Option<Stream<C>>,
}

/// Verified bytes as the host handed them over, chunk by chunk (kept as
/// they came, not copied into one buffer); bytes `from..to` of them, counted
/// across the chunks, are to be sent.
#[derive(Debug, Default)]
struct Batch {
    chunks: Vec<Vec<u8>>,
    from: usize,
    to: usize,
}

impl Batch {
    /// The bytes to send, a slice of one chunk at a time.
    fn to_send(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.chunks.iter().filter_map(move |chunk| {
            let (first, end) = (start, start + chunk.len());
            start = end;
            let (from, to) = (self.from.max(first), self.to.min(end));
            (from < to).then(|| &chunk[from - first..to - first])
        })
    }
}

/// Why a batch could not be served.
enum Failure {
    Body(BodyError),
    Integrity(String),
}

/// Content with an outboard, being read a batch of groups at a time.
#[derive(Debug)]
struct Stream<C> {
    content: C,
    path: String,
    size: u64,
    shape: Shape,
    root: blake3::Hash,
    /// The bytes to send: `first..end`.
    first: u64,
    end: u64,
    /// The next group to read.
    next: u64,
    /// Groups per batch (the window's worth).
    batch: u64,
    /// The outboard's header is yet to be checked.
    header_unchecked: bool,
}

impl<C> Handler<C> {
    /// Answer a read: from metadata alone, or by reading and verifying the
    /// content (its first window's worth, for content with an outboard),
    /// which then waits here for [`Handler::send_body`].
    pub async fn fetch<H: Host<Content = C>>(
        &mut self,
        host: &mut H,
        request: FetchRequest,
    ) -> Result<Fetched, HandlerError> {
        self.forget(host).await;
        // Conditional and metadata-only requests are answered from the index
        // without reading (and buffering) the content.
        if !request.want_body || !request.if_none_match.is_empty() {
            let meta = host
                .stat(&request.path)
                .await
                .map_err(HandlerError::Volume)?;
            if crate::etag_matches(&request.if_none_match, &meta.sha256) {
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

        let (meta, content) = host
            .open(&request.path)
            .await
            .map_err(HandlerError::Volume)?;
        // The validator is checked against the file as opened, the content
        // about to be sent, so a file replaced since the caller looked at it
        // is sent whole rather than as a tail of other content.
        let range = request
            .range
            .filter(|_| range::if_range_holds(request.if_range.as_ref(), &meta));
        let (body, first, end) = match range {
            None => (FetchBody::Full, 0, meta.size),
            Some(asked) => match range::resolve(asked, meta.size) {
                Some((first, last)) => (FetchBody::Partial((first, last)), first, last + 1),
                None => {
                    host.close_content(content).await;
                    return Err(HandlerError::RangeNotSatisfiable(meta.size));
                }
            },
        };
        let shape = Shape::of(meta.size);
        let root = meta
            .blake3
            .as_deref()
            .and_then(|hex| blake3::Hash::from_hex(hex).ok());
        let streamed = match root {
            Some(root)
                if shape.has_outboard()
                    && host.outboard_len(&content).await == shape.outboard_len() =>
            {
                Some(root)
            }
            _ => None,
        };
        let Some(root) = streamed else {
            let whole = read_whole(host, &meta, &content).await;
            if let Ok((_, Some(outboard))) = &whole {
                host.attach_outboard(&content, outboard).await;
            }
            host.close_content(content).await;
            let whole = whole.map(|(whole, _)| whole);
            let whole = whole?;
            self.prepared = Some(Prepared {
                batch: Batch {
                    chunks: vec![whole],
                    from: to_index(first),
                    to: to_index(end),
                },
                rest: None,
            });
            return Ok(Fetched { meta, body });
        };

        let window = request.window.max(GROUP);
        let mut stream = Stream {
            content,
            path: meta.path.clone(),
            size: meta.size,
            shape,
            root,
            first,
            end,
            next: first / GROUP,
            batch: window / GROUP,
            header_unchecked: true,
        };
        let mut batch = Batch::default();
        match stream.next_batch(host, &mut batch).await {
            Ok(true) => {
                self.prepared = Some(Prepared {
                    batch,
                    rest: Some(stream),
                });
                Ok(Fetched { meta, body })
            }
            Ok(false) => {
                host.close_content(stream.content).await;
                Ok(Fetched { meta, body })
            }
            Err(failure) => {
                host.close_content(stream.content).await;
                Err(match failure {
                    Failure::Body(error) => HandlerError::Body(error),
                    Failure::Integrity(why) => HandlerError::Integrity(why),
                })
            }
        }
    }

    /// Stream what the last `fetch` prepared to `out`, verifying the rest
    /// of the content as it goes, then forget it. Without a prepared body,
    /// sends nothing.
    pub async fn send_body<H: Host<Content = C>>(
        &mut self,
        host: &mut H,
        out: &H::Response,
    ) -> Result<(), BodyError> {
        let Some(prepared) = self.prepared.take() else {
            return Ok(());
        };
        let Prepared { mut batch, rest } = prepared;
        let sent = send(host, out, &batch).await;
        let Some(mut stream) = rest else {
            return sent;
        };
        let streamed = async {
            sent?;
            loop {
                match stream.next_batch(host, &mut batch).await {
                    Ok(true) => send(host, out, &batch).await?,
                    Ok(false) => return Ok(()),
                    Err(Failure::Body(error)) => return Err(error),
                    Err(Failure::Integrity(why)) => return Err(BodyError::Corrupt(why)),
                }
            }
        }
        .await;
        host.close_content(stream.content).await;
        streamed
    }

    /// Drop what a fetch prepared and nobody sent.
    async fn forget<H: Host<Content = C>>(&mut self, host: &mut H) {
        if let Some(stream) = self.prepared.take().and_then(|prepared| prepared.rest) {
            host.close_content(stream.content).await;
        }
    }
}

async fn send<H: Host>(host: &mut H, out: &H::Response, batch: &Batch) -> Result<(), BodyError> {
    for bytes in batch.to_send() {
        for chunk in bytes.chunks(to_index(CHUNK.into())) {
            host.write(out, chunk).await?;
        }
    }
    Ok(())
}

impl<C> Stream<C> {
    /// Read and verify the next batch of groups into `batch`; `false` once
    /// the range is sent.
    async fn next_batch<H: Host<Content = C>>(
        &mut self,
        host: &mut H,
        batch: &mut Batch,
    ) -> Result<bool, Failure> {
        let last_group = (self.end - 1) / GROUP;
        if self.end == self.first || self.next > last_group {
            return Ok(false);
        }
        let span = self.next..(last_group + 1).min(self.next + self.batch);
        let leaves = self.prove(host, span.clone()).await?;

        let start = span.start * GROUP;
        let stop = (span.end * GROUP).min(self.size);
        host.seek_content(&self.content, start)
            .await
            .map_err(Failure::Body)?;
        batch.chunks.clear();
        let wanted = to_index(stop - start);
        let mut read = 0;
        while read < wanted {
            let ask = (wanted - read).min(to_index(CHUNK.into()));
            let chunk = host
                .read_content(&self.content, u32::try_from(ask).unwrap_or(CHUNK))
                .await
                .map_err(Failure::Body)?;
            if chunk.is_empty() {
                return Err(Failure::Integrity(format!(
                    "{}: stored content ends at {} bytes, the index says {}",
                    self.path,
                    start + read as u64,
                    self.size
                )));
            }
            read += chunk.len();
            batch.chunks.push(chunk);
        }
        if let Some(group) = first_unlike::<H::Digests>(span.clone(), stop, &batch.chunks, &leaves)
        {
            let at = group * GROUP;
            return Err(Failure::Integrity(format!(
                "{}: bytes {at}..{} do not match the BLAKE3 tree recorded for them",
                self.path,
                (at + GROUP).min(stop)
            )));
        }
        self.next = span.end;
        batch.from = to_index(self.first.max(start) - start);
        batch.to = to_index(self.end.min(stop) - start);
        Ok(true)
    }

    /// The leaves of groups `span`, proved against the recorded root.
    async fn prove<H: Host<Content = C>>(
        &mut self,
        host: &mut H,
        span: std::ops::Range<u64>,
    ) -> Result<Vec<[u8; 32]>, Failure> {
        let nodes = self.shape.proof(span.clone());
        let mut offsets = Vec::with_capacity(nodes.len());
        for &node in &nodes {
            offsets.push(self.shape.offset(node).ok_or_else(|| {
                Failure::Integrity(format!(
                    "{}: a proof asked for a node not stored",
                    self.path
                ))
            })?);
        }
        let mut pieces = coalesce(&offsets);
        let header = std::mem::take(&mut self.header_unchecked);
        if header {
            pieces.insert(0, (0, crate::tree::HEADER.len() as u32));
        }
        let bytes = host
            .read_outboard(&self.content, &pieces)
            .await
            .map_err(Failure::Body)?;
        let mut base = Vec::with_capacity(pieces.len());
        let mut at = 0;
        for &(offset, len) in &pieces {
            base.push((offset, at));
            at += len as usize;
        }
        if bytes.len() != at {
            return Err(Failure::Integrity(format!(
                "{}: its BLAKE3 tree is shorter than its size needs",
                self.path
            )));
        }
        if header && bytes[..crate::tree::HEADER.len()] != crate::tree::HEADER {
            return Err(Failure::Integrity(format!(
                "{}: its BLAKE3 tree has an unknown format",
                self.path
            )));
        }
        let value = |offset: u64| -> [u8; 32] {
            let index = base.partition_point(|&(start, _)| start <= offset) - 1;
            let (start, position) = base[index];
            let at = position + (offset - start) as usize;
            bytes[at..at + 32].try_into().expect("32 bytes")
        };
        let values: Vec<[u8; 32]> = offsets.iter().map(|&offset| value(offset)).collect();
        if self.shape.root_from(span.clone(), &values) != self.root {
            return Err(Failure::Integrity(format!(
                "{}: its BLAKE3 tree does not lead to the recorded BLAKE3",
                self.path
            )));
        }
        Ok(nodes
            .iter()
            .zip(values)
            .filter(|(node, _)| is_leaf_in(node, &span))
            .map(|(_, value)| value)
            .collect())
    }
}

fn is_leaf_in(node: &Node, span: &std::ops::Range<u64>) -> bool {
    node.level == 0 && span.contains(&node.index)
}

/// The whole content, verified: what content without an outboard gets;
/// and, when it spans more than one group and has a recorded BLAKE3 but no
/// outboard (stored before they were kept), its outboard, computed as it
/// is verified, for the host to keep.
async fn read_whole<H: Host>(
    host: &mut H,
    meta: &FileMeta,
    content: &H::Content,
) -> Result<(Vec<u8>, Option<Vec<u8>>), HandlerError> {
    let mut whole: Vec<u8> = Vec::new();
    loop {
        let chunk = host
            .read_content(content, CHUNK)
            .await
            .map_err(HandlerError::Body)?;
        if chunk.is_empty() {
            break;
        }
        if whole.is_empty() {
            // Most often the whole content: kept as the host gave it.
            whole = chunk;
            whole.reserve(to_index(meta.size).saturating_sub(whole.len()));
        } else {
            whole.extend_from_slice(&chunk);
        }
    }
    let shape = Shape::of(meta.size);
    if shape.has_outboard()
        && let Some(recorded) = meta.blake3.as_deref()
        && host.outboard_len(content).await == 0
        && whole.len() as u64 == meta.size
    {
        // One pass gives both the check and the outboard.
        let mut tree = TreeWriter::<H::Digests>::new();
        tree.update(&whole);
        let (root, outboard) = tree.finish();
        let actual = root.to_hex();
        if actual.as_str() != recorded {
            return Err(hashes_unlike(meta, &actual, recorded));
        }
        return Ok((whole, Some(outboard)));
    }
    verify_whole::<H::Digests>(meta, &whole)?;
    Ok((whole, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_range_of_a_batch_is_sent() {
        let batch = Batch {
            chunks: vec![vec![1, 2, 3], vec![], vec![4, 5], vec![6, 7, 8]],
            from: 2,
            to: 7,
        };
        let sent: Vec<&[u8]> = batch.to_send().collect();
        assert_eq!(sent, vec![&[3][..], &[4, 5][..], &[6, 7][..]]);
    }
}
