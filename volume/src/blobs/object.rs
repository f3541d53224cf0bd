//! Blobs in an S3-compatible object store through Apache `object_store`:
//! the key is `[PREFIX/]<first two hex digits>/<sha256>`. A blob up to
//! [`SINGLE_PUT_MAX`] goes up in one `PutObject` with `If-None-Match: *`
//! (a blob already there is the same content); a larger one in a multipart
//! upload streamed from the staged file a part at a time, which the store
//! makes visible only when complete.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use futures_util::TryStreamExt as _;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use tokio::io::AsyncReadExt as _;

use super::reader::BlobReader;
use super::shared::ListedBlob;
use super::staged::{Staged, StagedBlob};
use crate::error::VolumeError;
use crate::types::Digest;

/// The key segment under the prefix that holds resumable uploads' parts.
const UPLOADS: &str = "uploads";

/// Largest blob sent in a single request; larger ones go in parts of this
/// size, so an upload holds at most one part in host memory.
const SINGLE_PUT_MAX: usize = 8 << 20;

/// Settings of an S3 store that take precedence over the standard `AWS_*`
/// environment variables, which are read otherwise (`AWS_ENDPOINT_URL`,
/// `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_ALLOW_HTTP`, and the rest `object_store` knows).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub allow_http: Option<bool>,
}

/// Shown without the secret.
impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

#[derive(Debug)]
pub(crate) struct ObjectBlobs {
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

impl ObjectBlobs {
    /// The bucket named by `--blob-store s3://BUCKET[/PREFIX]`; endpoint,
    /// region and credentials from the standard `AWS_*` variables
    /// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_REGION`, `AWS_ALLOW_HTTP`).
    pub(crate) fn s3(
        bucket: &str,
        prefix: &str,
        settings: &S3Settings,
    ) -> Result<Self, VolumeError> {
        let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
        let from_env = |name| std::env::var(name).ok();
        if let Some(endpoint) = settings
            .endpoint
            .clone()
            .or_else(|| from_env("AWS_ENDPOINT_URL"))
        {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = settings.region.clone().or_else(|| from_env("AWS_REGION")) {
            builder = builder.with_region(region);
        }
        if let Some(key) = &settings.access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &settings.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        if let Some(allow) = settings.allow_http {
            builder = builder.with_allow_http(allow);
        }
        let store = builder.build()?;
        Ok(Self {
            store: Arc::new(store),
            prefix: prefix.to_owned(),
        })
    }

    fn key(&self, digest: &Digest) -> ObjectPath {
        let hex = digest.as_str();
        if self.prefix.is_empty() {
            ObjectPath::from(format!("{}/{hex}", &hex[..2]))
        } else {
            ObjectPath::from(format!("{}/{}/{hex}", self.prefix, &hex[..2]))
        }
    }

    /// One `PutObject` of `bytes` at `key`: with `PutMode::Create`, a key
    /// already taken holds the same content (the key is its digest).
    async fn put_one(
        &self,
        key: &ObjectPath,
        bytes: Bytes,
        mode: PutMode,
    ) -> Result<(), VolumeError> {
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self.store.put_opts(key, bytes.into(), options).await {
            Ok(_) => Ok(()),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    pub(crate) async fn write(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        if staged.earlier().is_some() {
            return self.compose(&self.key(digest), staged).await;
        }
        self.upload(&self.key(digest), staged, PutMode::Create)
            .await
    }

    /// The blob of a resumable upload kept in parts, `staged` its last
    /// bytes: every part's content, then every outboard, in one multipart
    /// upload, read from the store a part at a time (not hashed again).
    async fn compose(&self, key: &ObjectPath, staged: &mut StagedBlob) -> Result<(), VolumeError> {
        let (upload, parts) = staged
            .earlier()
            .map(|(upload, parts)| (upload.to_owned(), parts.to_vec()))
            .unwrap_or_default();
        let last_len = staged.len();
        let last = match staged.staged().await? {
            Staged::Memory { bytes, .. } => Last::Memory(Bytes::copy_from_slice(bytes)),
            Staged::File(path) => Last::File(path.to_path_buf()),
        };
        // (object, from, to): the contents, then the outboards.
        let mut pieces = Vec::new();
        for part in &parts {
            pieces.push((Some(self.part_key(&upload, &part.name)), 0, part.size));
        }
        pieces.push((None, 0, last_len));
        for part in &parts {
            let end = part.size + part.outboard;
            pieces.push((Some(self.part_key(&upload, &part.name)), part.size, end));
        }
        pieces.push((None, last_len, u64::MAX));
        let mut writer = object_store::WriteMultipart::new_with_chunk_size(
            self.store.put_multipart(key).await?,
            SINGLE_PUT_MAX,
        );
        let sent = async {
            for (object, from, to) in pieces {
                match object {
                    Some(object) => {
                        let mut at = from;
                        while at < to {
                            let end = to.min(at + SINGLE_PUT_MAX as u64);
                            writer.wait_for_capacity(2).await?;
                            writer.write(&self.store.get_range(&object, at..end).await?);
                            at = end;
                        }
                    }
                    None => last.copy(&mut writer, from, to).await?,
                }
            }
            Ok::<(), VolumeError>(())
        }
        .await;
        match sent {
            Ok(()) => {
                writer.finish().await?;
                Ok(())
            }
            Err(error) => {
                if let Err(abort) = writer.abort().await {
                    tracing::warn!(%abort, "could not abort a multipart upload");
                }
                Err(error)
            }
        }
    }

    /// The key of part `name` of upload `upload`.
    fn part_key(&self, upload: &str, name: &str) -> ObjectPath {
        ObjectPath::from(format!("{}{UPLOADS}/{upload}/{name}", self.key_prefix()))
    }

    /// `PREFIX/`, or nothing.
    fn key_prefix(&self) -> String {
        if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        }
    }

    /// Store `staged` as part `name` of upload `upload`.
    pub(crate) async fn write_part(
        &self,
        upload: &str,
        name: &str,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        self.upload(&self.part_key(upload, name), staged, PutMode::Overwrite)
            .await
    }

    /// Part `name` of upload `upload`, opened for reading; `None` if absent.
    pub(crate) async fn open_part(
        &self,
        upload: &str,
        name: &str,
    ) -> Result<Option<BlobReader>, VolumeError> {
        let key = self.part_key(upload, name);
        match self.store.head(&key).await {
            Ok(found) => Ok(Some(BlobReader::object(
                self.store.clone(),
                key,
                found.size,
                found.size,
            ))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Remove part `name` of upload `upload`.
    pub(crate) async fn remove_part(&self, upload: &str, name: &str) -> Result<(), VolumeError> {
        match self.store.delete(&self.part_key(upload, name)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Remove every part of upload `upload`.
    pub(crate) async fn remove_parts(&self, upload: &str) -> Result<(), VolumeError> {
        let prefix = ObjectPath::from(format!("{}{UPLOADS}/{upload}", self.key_prefix()));
        let parts: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
        for part in parts {
            match self.store.delete(&part.location).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// The uploads that have parts here, with when a part last changed.
    pub(crate) async fn uploads_with_parts(
        &self,
    ) -> Result<Vec<(String, SystemTime)>, VolumeError> {
        let prefix = ObjectPath::from(format!("{}{UPLOADS}", self.key_prefix()));
        let parts: Vec<_> = self.store.list(Some(&prefix)).try_collect().await?;
        let mut found: std::collections::HashMap<String, SystemTime> = Default::default();
        for part in parts {
            let mut segments = part.location.parts().map(|s| s.as_ref().to_owned());
            let Some(upload) = segments
                .by_ref()
                .skip_while(|segment| segment != UPLOADS)
                .nth(1)
            else {
                continue;
            };
            let modified = SystemTime::from(part.last_modified);
            let latest = found.entry(upload).or_insert(modified);
            *latest = (*latest).max(modified);
        }
        Ok(found.into_iter().collect())
    }

    /// `staged` as the object `digest`: in one request up to
    /// [`SINGLE_PUT_MAX`] (`mode` says whether it may replace one), else
    /// in a multipart upload, which the store makes visible only complete.
    async fn upload(
        &self,
        key: &ObjectPath,
        staged: &mut StagedBlob,
        mode: PutMode,
    ) -> Result<(), VolumeError> {
        let key = key.clone();
        let len = usize::try_from(staged.stored_len()).unwrap_or(usize::MAX);
        let path = match staged.staged().await? {
            Staged::Memory { bytes, .. } => {
                return self
                    .put_one(&key, Bytes::copy_from_slice(bytes), mode)
                    .await;
            }
            Staged::File(path) => path,
        };
        let mut file = tokio::fs::File::open(path)
            .await
            .map_err(|e| VolumeError::io("reading a staged blob", e))?;
        if len <= SINGLE_PUT_MAX {
            let mut bytes = Vec::with_capacity(len);
            file.read_to_end(&mut bytes)
                .await
                .map_err(|e| VolumeError::io("reading a staged blob", e))?;
            return self.put_one(&key, bytes.into(), mode).await;
        }
        let mut upload = self.store.put_multipart(&key).await?;
        let sent = async {
            let mut part = vec![0; SINGLE_PUT_MAX];
            loop {
                let filled = fill(&mut file, &mut part).await?;
                if filled == 0 {
                    break;
                }
                let payload = PutPayload::from(part[..filled].to_vec());
                upload.put_part(payload).await?;
            }
            upload.complete().await?;
            Ok::<(), VolumeError>(())
        }
        .await;
        if let Err(error) = sent {
            if let Err(abort) = upload.abort().await {
                tracing::warn!(%abort, "could not abort a multipart upload");
            }
            return Err(error);
        }
        Ok(())
    }

    /// Write `staged` over the object: a `PutObject` or a completed
    /// multipart upload replaces it whole, never partly.
    pub(crate) async fn replace(
        &self,
        digest: &Digest,
        staged: &mut StagedBlob,
    ) -> Result<(), VolumeError> {
        self.upload(&self.key(digest), staged, PutMode::Overwrite)
            .await
    }

    pub(crate) async fn exists(&self, digest: &Digest) -> Result<bool, VolumeError> {
        match self.store.head(&self.key(digest)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    pub(crate) async fn open_blob(
        &self,
        digest: &Digest,
        size: u64,
    ) -> Result<Option<BlobReader>, VolumeError> {
        // Its length tells whether an outboard follows the content; the
        // content is fetched from the first read's offset on.
        let key = self.key(digest);
        match self.store.head(&key).await {
            Ok(found) => Ok(Some(BlobReader::object(
                self.store.clone(),
                key,
                size,
                found.size,
            ))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    pub(crate) async fn remove(&self, digest: &Digest) -> Result<(), VolumeError> {
        match self.store.delete(&self.key(digest)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    pub(crate) async fn list(&self) -> Result<Vec<ListedBlob>, VolumeError> {
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        let objects: Vec<_> = self.store.list(prefix.as_ref()).try_collect().await?;
        Ok(objects
            .into_iter()
            .filter_map(|object| {
                let digest = Digest::parse(object.location.filename()?).ok()?;
                Some(ListedBlob {
                    digest,
                    modified: SystemTime::from(object.last_modified),
                })
            })
            .collect())
    }
}

/// A composed blob's last bytes, staged here.
enum Last {
    Memory(Bytes),
    File(std::path::PathBuf),
}

impl Last {
    /// Bytes `from..to` (to the end at most) into `writer`.
    async fn copy(
        &self,
        writer: &mut object_store::WriteMultipart,
        from: u64,
        to: u64,
    ) -> Result<(), VolumeError> {
        match self {
            Self::Memory(bytes) => {
                let len = bytes.len() as u64;
                let (from, to) = (from.min(len), to.min(len));
                writer.write(&bytes[from as usize..to as usize]);
            }
            Self::File(path) => {
                use tokio::io::AsyncSeekExt as _;
                let mut file = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| VolumeError::io("reading a staged blob", e))?;
                file.seek(std::io::SeekFrom::Start(from))
                    .await
                    .map_err(|e| VolumeError::io("reading a staged blob", e))?;
                let mut left = to - from;
                let mut piece = vec![0; SINGLE_PUT_MAX];
                while left > 0 {
                    let want = piece.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let filled = fill(&mut file, &mut piece[..want]).await?;
                    if filled == 0 {
                        break;
                    }
                    writer.wait_for_capacity(2).await?;
                    writer.write(&piece[..filled]);
                    left -= filled as u64;
                }
            }
        }
        Ok(())
    }
}

/// Read until `buffer` is full or the file ends; returns the bytes read.
async fn fill(file: &mut tokio::fs::File, buffer: &mut [u8]) -> Result<usize, VolumeError> {
    let mut filled = 0;
    while filled < buffer.len() {
        let n = file
            .read(&mut buffer[filled..])
            .await
            .map_err(|e| VolumeError::io("reading a staged blob", e))?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}
