//! `ListObjects` and `ListObjectsV2`: the files under a bucket as one flat
//! key space in byte order, with S3's prefix, delimiter (keys sharing what
//! comes before it are rolled into one common prefix), markers and pages.

use std::ops::Bound;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use s3s::dto::{
    CommonPrefix, ETag, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input,
    ListObjectsV2Output, Object, ObjectStorageClass,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::{FileMeta, Owner};

use super::error::object_error;
use super::info::{ObjectInfo, etag_of};
use super::paging::{encoded, max_keys, past_prefix, url_encoding};
use super::{S3Api, caller, owner_of, timestamp};

/// Rows read from the index at a time.
const SCAN_BATCH: usize = 1000;

/// One page of a listing.
struct Page {
    objects: Vec<Listed>,
    prefixes: Vec<String>,
    truncated: bool,
    /// The last key or common prefix of the page, where the next begins.
    last: Option<String>,
}

/// An object a listing names: a file, or a folder made on purpose (a
/// folder marker, `key/`, what consoles and `PUT key/` make).
enum Listed {
    File(FileMeta),
    Marker { path: String, created_ms: i64 },
}

impl Listed {
    fn path(&self) -> &str {
        match self {
            Self::File(meta) => &meta.path,
            Self::Marker { path, .. } => path,
        }
    }
}

/// A listing request, in the terms both versions share.
struct Query<'a> {
    bucket: &'a str,
    prefix: &'a str,
    delimiter: Option<&'a str>,
    /// List keys strictly after this.
    after: Option<String>,
    max_keys: usize,
}

impl S3Api {
    /// One page of `query` over `owner`'s tree.
    async fn list_page(&self, owner: Owner, query: &Query<'_>) -> S3Result<Page> {
        self.require_bucket(owner, query.bucket).await?;
        let root = format!("{}/", query.bucket);
        let base = format!("{root}{}", query.prefix);
        let upper = past_prefix(&base);
        let mut page = Page {
            objects: Vec::new(),
            prefixes: Vec::new(),
            truncated: false,
            last: None,
        };
        if query.max_keys == 0 {
            return Ok(page);
        }
        let mut lower = match &query.after {
            Some(after) if format!("{root}{after}") >= base => {
                Bound::Excluded(format!("{root}{after}"))
            }
            _ => Bound::Included(base.clone()),
        };
        'scan: loop {
            let (entries, exhausted) = self
                .entries_from(owner, &lower, upper.as_deref(), &root)
                .await?;
            // The common prefix whose keys are being passed over: the rest
            // of this batch skips them, the next read starts past them.
            let mut skipping: Option<String> = None;
            for entry in entries {
                let key = entry.path()[root.len()..].to_owned();
                if skipping
                    .as_ref()
                    .is_some_and(|common| key.starts_with(common.as_str()))
                {
                    continue;
                }
                let rolled = query
                    .delimiter
                    .filter(|delimiter| !delimiter.is_empty())
                    .and_then(|delimiter| {
                        key[query.prefix.len()..]
                            .find(delimiter)
                            .map(|at| key[..query.prefix.len() + at + delimiter.len()].to_owned())
                    });
                // A common prefix the marker already passed (the marker is
                // that prefix, or a key inside it) was listed before.
                let seen = rolled.as_ref().is_some_and(|common| {
                    query
                        .after
                        .as_ref()
                        .is_some_and(|after| after.as_str() >= common.as_str())
                });
                if !seen {
                    if page.objects.len() + page.prefixes.len() == query.max_keys {
                        page.truncated = true;
                        break 'scan;
                    }
                    match &rolled {
                        Some(common) => page.prefixes.push(common.clone()),
                        None => page.objects.push(entry),
                    }
                    page.last = Some(rolled.clone().unwrap_or_else(|| key.clone()));
                }
                if let Some(common) = rolled {
                    match past_prefix(&format!("{root}{common}")) {
                        Some(past) => lower = Bound::Included(past),
                        None => break 'scan,
                    }
                    skipping = Some(common);
                    continue;
                }
                lower = Bound::Excluded(format!("{root}{key}"));
            }
            if exhausted {
                break;
            }
        }
        Ok(page)
    }
}

impl S3Api {
    /// The next entries of the bucket `root` from `lower`: files and
    /// folder markers merged in byte order, and whether they are the last.
    /// The bucket's own folder is not among them.
    async fn entries_from(
        &self,
        owner: Owner,
        lower: &Bound<String>,
        upper: Option<&str>,
        root: &str,
    ) -> S3Result<(Vec<Listed>, bool)> {
        let from = match lower {
            Bound::Included(bound) => Bound::Included(bound.as_str()),
            Bound::Excluded(bound) => Bound::Excluded(bound.as_str()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let files = self
            .files
            .scan(owner, from, upper, SCAN_BATCH)
            .await
            .map_err(object_error)?;
        let folders = self
            .files
            .scan_folders(owner, from, upper, SCAN_BATCH)
            .await
            .map_err(object_error)?;
        // Past the end of a full batch of one table, the other's rows may
        // interleave with rows not read yet: stop there.
        let horizon = [
            (files.len() == SCAN_BATCH).then(|| files.last().map(|meta| meta.path.clone())),
            (folders.len() == SCAN_BATCH).then(|| folders.last().map(|(path, _)| path.clone())),
        ]
        .into_iter()
        .flatten()
        .flatten()
        .min();
        let markers = folders
            .into_iter()
            .filter(|(path, _)| path.as_str() != root)
            .map(|(path, created_ms)| Listed::Marker { path, created_ms });
        let mut entries: Vec<Listed> = files.into_iter().map(Listed::File).chain(markers).collect();
        entries.sort_by(|a, b| a.path().cmp(b.path()));
        let last = horizon.is_none();
        if let Some(horizon) = horizon {
            entries.retain(|entry| entry.path() <= horizon.as_str());
        }
        Ok((entries, last))
    }
}

/// The keys of a page as S3 lists them, with their `owner` when asked.
fn objects(
    page: &Page,
    root_len: usize,
    encode: bool,
    owner: Option<&s3s::dto::Owner>,
) -> Vec<Object> {
    page.objects
        .iter()
        .map(|entry| {
            let (size, etag, modified_ms) = match entry {
                Listed::File(meta) => {
                    let info = ObjectInfo::of(meta);
                    (meta.size, etag_of(meta, info.as_ref()), meta.modified_ms)
                }
                Listed::Marker { created_ms, .. } => {
                    (0, super::info::EMPTY_MD5.to_owned(), *created_ms)
                }
            };
            Object {
                key: Some(encoded(&entry.path()[root_len..], encode)),
                size: Some(i64::try_from(size).unwrap_or(i64::MAX)),
                e_tag: Some(ETag::Strong(etag)),
                last_modified: Some(timestamp(modified_ms)),
                storage_class: Some(ObjectStorageClass::from_static(
                    ObjectStorageClass::STANDARD,
                )),
                owner: owner.cloned(),
                ..Object::default()
            }
        })
        .collect()
}

fn common_prefixes(page: &Page, encode: bool) -> Vec<CommonPrefix> {
    page.prefixes
        .iter()
        .map(|prefix| CommonPrefix {
            prefix: Some(encoded(prefix, encode)),
        })
        .collect()
}

/// A continuation token: where the next page begins, opaque to clients.
fn token_of(last: &str) -> String {
    URL_SAFE_NO_PAD.encode(last)
}

fn token_key(token: &str) -> S3Result<String> {
    URL_SAFE_NO_PAD
        .decode(token)
        .ok()
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "The continuation token provided is incorrect"
            )
        })
}

impl S3Api {
    pub(super) async fn list_objects_(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let encode = url_encoding(input.encoding_type.as_ref())?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let query = Query {
            bucket: &input.bucket,
            prefix: &prefix,
            delimiter: input.delimiter.as_deref(),
            after: input.marker.clone().filter(|marker| !marker.is_empty()),
            max_keys: max_keys(input.max_keys)?,
        };
        let page = self.list_page(caller.owner(), &query).await?;
        let root_len = input.bucket.len() + 1;
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket.clone()),
            prefix: Some(encoded(&prefix, encode)),
            marker: Some(encoded(input.marker.as_deref().unwrap_or_default(), encode)),
            max_keys: Some(i32::try_from(query.max_keys).unwrap_or(i32::MAX)),
            is_truncated: Some(page.truncated),
            // Version 1 always names each key's owner.
            contents: Some(objects(&page, root_len, encode, Some(&owner_of(&caller)))),
            common_prefixes: Some(common_prefixes(&page, encode)),
            delimiter: input
                .delimiter
                .as_deref()
                .map(|delimiter| encoded(delimiter, encode)),
            next_marker: page
                .truncated
                .then(|| page.last.as_deref().map(|last| encoded(last, encode)))
                .flatten(),
            encoding_type: input.encoding_type,
            ..ListObjectsOutput::default()
        }))
    }

    pub(super) async fn list_objects_v2_(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let caller = caller(&req)?;
        let input = req.input;
        let encode = url_encoding(input.encoding_type.as_ref())?;
        let prefix = input.prefix.clone().unwrap_or_default();
        let after = match &input.continuation_token {
            Some(token) => Some(token_key(token)?),
            None => input.start_after.clone().filter(|after| !after.is_empty()),
        };
        let query = Query {
            bucket: &input.bucket,
            prefix: &prefix,
            delimiter: input.delimiter.as_deref(),
            after,
            max_keys: max_keys(input.max_keys)?,
        };
        let page = self.list_page(caller.owner(), &query).await?;
        let root_len = input.bucket.len() + 1;
        let owner = input
            .fetch_owner
            .unwrap_or(false)
            .then(|| owner_of(&caller));
        let contents = objects(&page, root_len, encode, owner.as_ref());
        let prefixes = common_prefixes(&page, encode);
        let key_count = contents.len() + prefixes.len();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket.clone()),
            prefix: Some(encoded(&prefix, encode)),
            max_keys: Some(i32::try_from(query.max_keys).unwrap_or(i32::MAX)),
            key_count: Some(i32::try_from(key_count).unwrap_or(i32::MAX)),
            continuation_token: input.continuation_token,
            is_truncated: Some(page.truncated),
            next_continuation_token: page
                .truncated
                .then(|| page.last.as_deref().map(token_of))
                .flatten(),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            delimiter: input
                .delimiter
                .as_deref()
                .map(|delimiter| encoded(delimiter, encode)),
            encoding_type: input.encoding_type,
            start_after: input
                .start_after
                .as_deref()
                .map(|after| encoded(after, encode)),
            ..ListObjectsV2Output::default()
        }))
    }
}
