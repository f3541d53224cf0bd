//! A stored blob's content, read a chunk at a time from either store, from
//! any offset; and the BLAKE3 outboard stored after it.
//!
//! A blob is its content followed by its outboard (the hash tree the
//! handler writes as it hashes an upload, see `storage-handler`'s `tree`):
//! one object, written and removed as one, so the two can never part. The
//! index records the content's size; whatever the object holds past it is
//! the outboard. Blobs stored before outboards were kept end at the
//! content.

use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};

use super::shared::read_at;
use crate::error::VolumeError;

enum Source {
    /// A local file, read with positioned reads.
    File(Arc<std::fs::File>),
    /// The whole content, read already (small blobs).
    Memory(Bytes),
    /// An object, streamed from the position on first read.
    Object {
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
        stream: Option<BoxStream<'static, object_store::Result<Bytes>>>,
        /// Received and not yet handed out.
        pending: Bytes,
    },
}

/// A stored blob's content, read a chunk at a time.
pub struct BlobReader {
    source: Source,
    /// The content's size, as the index says; reading stops there.
    size: u64,
    /// The next byte to read.
    position: u64,
    /// Bytes of the blob in the store: content and outboard.
    stored: u64,
}

impl std::fmt::Debug for BlobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.source {
            Source::File(_) => "file",
            Source::Memory(_) => "memory",
            Source::Object { .. } => "object",
        };
        f.debug_struct("BlobReader")
            .field("source", &source)
            .field("size", &self.size)
            .field("position", &self.position)
            .field("stored", &self.stored)
            .finish()
    }
}

impl BlobReader {
    /// A local blob file of `stored` bytes, whose content is `size` bytes.
    pub(crate) fn file(file: std::fs::File, size: u64, stored: u64) -> Self {
        Self {
            source: Source::File(Arc::new(file)),
            size,
            position: 0,
            stored,
        }
    }

    /// Content already read, of a blob the index says is `size` bytes
    /// (`content` may be shorter: a damaged blob, which verification
    /// catches). No outboard.
    pub(crate) fn in_memory(content: Bytes, size: u64) -> Self {
        Self {
            source: Source::Memory(content),
            size,
            position: 0,
            stored: size,
        }
    }

    /// The object `key` of `stored` bytes, whose content is `size` bytes.
    pub(crate) fn object(
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
        size: u64,
        stored: u64,
    ) -> Self {
        Self {
            source: Source::Object {
                store,
                key,
                stream: None,
                pending: Bytes::new(),
            },
            size,
            position: 0,
            stored,
        }
    }

    /// Read on from byte `offset` of the content (at most its size).
    pub fn seek(&mut self, offset: u64) {
        let offset = offset.min(self.size);
        if offset == self.position {
            return;
        }
        self.position = offset;
        if let Source::Object {
            stream, pending, ..
        } = &mut self.source
        {
            *stream = None;
            *pending = Bytes::new();
        }
    }

    /// Read no further than byte `end` (a part of a larger file).
    pub(crate) fn end_at(&mut self, end: u64) {
        self.size = self.size.min(end);
        self.stored = self.size;
    }

    /// Bytes stored after the content: its outboard, if it has one.
    pub fn outboard_len(&self) -> u64 {
        self.stored.saturating_sub(self.size)
    }

    /// The outboard's bytes at each `(offset, length)`, one after another.
    /// A piece past the outboard's end is an error.
    pub async fn read_outboard(&mut self, pieces: &[(u64, u32)]) -> Result<Vec<u8>, VolumeError> {
        let mut ranges = Vec::with_capacity(pieces.len());
        for &(offset, len) in pieces {
            let start = self.size.saturating_add(offset);
            let end = start.saturating_add(u64::from(len));
            if end > self.stored {
                return Err(VolumeError::io(
                    "reading a blob's outboard",
                    std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("bytes {start}..{end} of a blob of {}", self.stored),
                    ),
                ));
            }
            ranges.push(start..end);
        }
        match &self.source {
            Source::Memory(_) => Ok(Vec::new()),
            Source::File(file) => {
                let mut out = Vec::new();
                for range in ranges {
                    let len = usize::try_from(range.end - range.start).unwrap_or(0);
                    let piece =
                        read_at(file, vec![0; len], range.start, "reading a blob's outboard")
                            .await?;
                    if piece.len() < len {
                        return Err(VolumeError::io(
                            "reading a blob's outboard",
                            std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                format!("the blob ends before byte {}", range.end),
                            ),
                        ));
                    }
                    out.extend_from_slice(&piece);
                }
                Ok(out)
            }
            Source::Object { store, key, .. } => {
                let parts = store.get_ranges(key, &ranges).await?;
                Ok(parts.iter().flat_map(|part| part.iter().copied()).collect())
            }
        }
    }

    /// Up to `max` more bytes; empty at the end. A blob shorter than the
    /// index says ends early, which the reader's verification catches.
    pub async fn read(&mut self, max: usize) -> Result<Vec<u8>, VolumeError> {
        let want = usize::try_from(self.size - self.position)
            .unwrap_or(usize::MAX)
            .min(max);
        if want == 0 {
            return Ok(Vec::new());
        }
        let position = self.position;
        let chunk = match &mut self.source {
            Source::Memory(content) => {
                let start = usize::try_from(position)
                    .unwrap_or(usize::MAX)
                    .min(content.len());
                let end = (start + want).min(content.len());
                content[start..end].to_vec()
            }
            Source::File(file) => read_at(file, vec![0; want], position, "reading a blob").await?,
            Source::Object {
                store,
                key,
                stream,
                pending,
            } => {
                let mut chunk = vec![0; want];
                let mut filled = 0;
                while filled < want {
                    if pending.is_empty() {
                        let stream = match stream {
                            Some(stream) => stream,
                            None => {
                                let options = GetOptions {
                                    range: Some(GetRange::Bounded(position..self.size)),
                                    ..GetOptions::default()
                                };
                                let got = store.get_opts(key, options).await?;
                                stream.insert(got.into_stream())
                            }
                        };
                        match stream.next().await {
                            Some(received) => *pending = received?,
                            None => break,
                        }
                        if pending.is_empty() {
                            continue;
                        }
                    }
                    let n = pending.len().min(want - filled);
                    chunk[filled..filled + n].copy_from_slice(&pending.split_to(n));
                    filled += n;
                }
                chunk.truncate(filled);
                chunk
            }
        };
        self.position = if chunk.len() < want {
            self.size
        } else {
            position + chunk.len() as u64
        };
        Ok(chunk)
    }

    /// Everything that is left, in one buffer (for tests and small files).
    pub async fn read_to_end(&mut self) -> Result<Vec<u8>, VolumeError> {
        let mut all = Vec::new();
        loop {
            let chunk = self.read(1 << 20).await?;
            if chunk.is_empty() {
                return Ok(all);
            }
            all.extend_from_slice(&chunk);
        }
    }
}
