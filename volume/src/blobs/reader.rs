//! A stored blob's content, read a chunk at a time from either store.

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;
use tokio::io::AsyncReadExt as _;

use crate::error::VolumeError;

enum Source {
    File(tokio::fs::File),
    Stream {
        stream: BoxStream<'static, object_store::Result<Bytes>>,
        /// Received and not yet handed out.
        pending: Bytes,
    },
}

/// A stored blob's content, read a chunk at a time.
pub struct BlobReader {
    source: Source,
    /// Bytes the index says are left; reading stops there.
    remaining: u64,
}

impl std::fmt::Debug for BlobReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match self.source {
            Source::File(_) => "file",
            Source::Stream { .. } => "object",
        };
        f.debug_struct("BlobReader")
            .field("source", &source)
            .field("remaining", &self.remaining)
            .finish()
    }
}

impl BlobReader {
    pub(crate) fn file(file: tokio::fs::File, size: u64) -> Self {
        Self {
            source: Source::File(file),
            remaining: size,
        }
    }

    /// Content already read, of a blob the index says is `size` bytes
    /// (`content` may be shorter: a damaged blob, which verification
    /// catches).
    pub(crate) fn in_memory(content: Bytes, size: u64) -> Self {
        Self::stream(
            futures_util::stream::once(async { Ok(content) }).boxed(),
            size,
        )
    }

    pub(crate) fn stream(
        stream: BoxStream<'static, object_store::Result<Bytes>>,
        size: u64,
    ) -> Self {
        Self {
            source: Source::Stream {
                stream,
                pending: Bytes::new(),
            },
            remaining: size,
        }
    }

    /// Up to `max` more bytes; empty at the end. A blob shorter than the
    /// index says ends early, which the reader's verification catches.
    pub async fn read(&mut self, max: usize) -> Result<Vec<u8>, VolumeError> {
        let want = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(max);
        let mut chunk = vec![0; want];
        let mut filled = 0;
        while filled < want {
            let n = match &mut self.source {
                Source::File(file) => file
                    .read(&mut chunk[filled..])
                    .await
                    .map_err(|e| VolumeError::io("reading a blob", e))?,
                Source::Stream { stream, pending } => {
                    if pending.is_empty() {
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
                    n
                }
            };
            if n == 0 {
                break;
            }
            filled += n;
        }
        chunk.truncate(filled);
        self.remaining -= filled as u64;
        if filled < want {
            self.remaining = 0;
        }
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
