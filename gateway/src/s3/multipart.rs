//! Multipart uploads: upload sessions of the file service whose parts are
//! numbered. Parts are kept durably (database + blob store) across
//! restarts and gateways; completing sends the chosen parts through an
//! instance as one upload, so the object is hashed and verified like any
//! other, and appears at its key atomically. Abandoned uploads expire
//! (`--upload-expiry` after their last part) and are collected.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use md5::Digest as _;
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, ChecksumAlgorithm, ChecksumType,
    CommonPrefix, CompleteMultipartUploadInput, CompleteMultipartUploadOutput, CopyPartResult,
    CreateMultipartUploadInput, CreateMultipartUploadOutput, ETag, ListMultipartUploadsInput,
    ListMultipartUploadsOutput, ListPartsInput, ListPartsOutput, MultipartUpload, Part,
    UploadPartCopyInput, UploadPartCopyOutput, UploadPartInput, UploadPartOutput,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use serde::{Deserialize, Serialize};
use volume::uploads::{MultipartPart, Upload};

use crate::auth::Caller;
use crate::error::AppError;
use crate::runtime::{ByteRange, Describe};
use crate::service::{MAX_PARTS, ReadBody, Want};

use super::error::object_error;
use super::info::{
    Algorithm, Checked, ChecksumFields, ObjectInfo, StoredChecksum, Verdict, declared_checksum,
    sent_checksums,
};
use super::{S3Api, caller, object_path, timestamp};

/// Every part but the last is at least this large (S3's rule).
const MIN_PART_SIZE: u64 = 5 << 20;

/// What an upload keeps from its creation until it completes.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Pending {
    #[serde(default)]
    meta: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// The checksum asked for at creation.
    #[serde(default)]
    checksum: Option<Algorithm>,
    /// Of the whole object, rather than composed of the parts'.
    #[serde(default)]
    full_object: bool,
}

fn no_such_upload() -> S3Error {
    s3_error!(
        NoSuchUpload,
        "The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed."
    )
}

/// A part's stored checksum (`ALGORITHM:base64`), split.
fn part_checksum(part: &MultipartPart) -> Option<(Algorithm, &str)> {
    let (name, value) = part.checksum.split_once(':')?;
    Some((Algorithm::parse(name)?, value))
}

fn part_fields(part: &MultipartPart) -> ChecksumFields {
    ChecksumFields::of(
        part_checksum(part)
            .map(|(algorithm, value)| StoredChecksum {
                algorithm,
                value: value.to_owned(),
                composite: false,
            })
            .as_ref(),
    )
}

impl S3Api {
    /// `caller`'s upload `id`, if it is for `bucket`/`key`.
    async fn upload_for(
        &self,
        caller: &Caller,
        bucket: &str,
        key: &str,
        id: &str,
    ) -> S3Result<Upload> {
        let path = object_path(bucket, key)?;
        let upload = match self.files.find_multipart(caller, id).await {
            Ok(upload) => upload,
            Err(AppError::NotFound(_)) => return Err(no_such_upload()),
            Err(error) => return Err(object_error(error)),
        };
        if upload.path != path.as_str() {
            return Err(no_such_upload());
        }
        Ok(upload)
    }

    pub(super) async fn create_multipart_upload_(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        let checksum = input
            .checksum_algorithm
            .as_ref()
            .map(|algorithm| {
                Algorithm::parse(algorithm.as_str()).ok_or_else(|| {
                    s3_error!(
                        InvalidRequest,
                        "Checksum algorithm provided is unsupported."
                    )
                })
            })
            .transpose()?;
        let full_object = match input.checksum_type.as_ref().map(ChecksumType::as_str) {
            Some(ChecksumType::FULL_OBJECT) => {
                if matches!(checksum, Some(Algorithm::Sha1 | Algorithm::Sha256)) {
                    return Err(s3_error!(
                        InvalidRequest,
                        "The FULL_OBJECT checksum type is not supported for SHA1 or SHA256."
                    ));
                }
                true
            }
            Some(ChecksumType::COMPOSITE) if matches!(checksum, Some(Algorithm::Crc64Nvme)) => {
                return Err(s3_error!(
                    InvalidRequest,
                    "The COMPOSITE checksum type is not supported for CRC64NVME."
                ));
            }
            Some(ChecksumType::COMPOSITE) => false,
            None => matches!(checksum, Some(Algorithm::Crc64Nvme)),
            Some(_) => return Err(s3_error!(InvalidRequest, "Unknown checksum type.")),
        };
        let meta = input.metadata.unwrap_or_default().into_iter().collect();
        super::info::check_metadata_size(&meta)?;
        let pending = Pending {
            meta,
            headers: ObjectInfo::stored_headers(
                input.cache_control.as_ref(),
                input.content_disposition.as_ref(),
                input.content_encoding.as_ref(),
                input.content_language.as_ref(),
                input.expires.as_ref(),
            ),
            checksum,
            full_object,
        };
        let upload = self
            .files
            .begin_multipart(
                &caller,
                &path,
                Some(input.content_type.map_or_else(
                    || super::info::DEFAULT_CONTENT_TYPE.to_owned(),
                    |content_type| content_type.to_string(),
                )),
                serde_json::to_string(&pending).unwrap_or_default(),
            )
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload.id),
            checksum_algorithm: checksum
                .map(|algorithm| ChecksumAlgorithm::from_static(algorithm.name())),
            checksum_type: checksum.map(|_| {
                ChecksumType::from_static(if full_object {
                    ChecksumType::FULL_OBJECT
                } else {
                    ChecksumType::COMPOSITE
                })
            }),
            ..CreateMultipartUploadOutput::default()
        }))
    }

    pub(super) async fn upload_part_(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        let caller = caller(&req)?;
        let declared = declared_checksum(
            sent_checksums!(req.input),
            req.input.checksum_algorithm.as_ref(),
            &req.headers,
        )?;
        let trailers = req.trailing_headers.clone();
        let input = req.input;
        let number = part_number(input.part_number)?;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let body = input.body.unwrap_or_else(|| {
            s3s::dto::StreamingBlob::wrap(futures_util::stream::empty::<
                Result<bytes::Bytes, std::io::Error>,
            >())
        });
        let verdict = Verdict::default();
        let checked = Checked::new(
            body,
            input.content_md5.as_deref(),
            declared,
            trailers,
            verdict.clone(),
        )?;
        let part = self
            .store_part(&caller, &upload, number, checked, &verdict)
            .await?;
        let fields = part_fields(&part);
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(ETag::Strong(part.etag)),
            checksum_crc32: fields.crc32,
            checksum_crc32c: fields.crc32c,
            checksum_crc64nvme: fields.crc64nvme,
            checksum_sha1: fields.sha1,
            checksum_sha256: fields.sha256,
            ..UploadPartOutput::default()
        }))
    }

    /// Store `body` (checked into `verdict`) as part `number` of `upload`.
    async fn store_part<S>(
        &self,
        caller: &Caller,
        upload: &Upload,
        number: u32,
        body: S,
        verdict: &Verdict,
    ) -> S3Result<MultipartPart>
    where
        S: futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static,
    {
        let described = Arc::new(Mutex::new(None));
        let describe = {
            let verdict = verdict.clone();
            let described = described.clone();
            move || match verdict.take() {
                Some(Ok(received)) => {
                    let checksum = received
                        .checksum
                        .map(|(algorithm, value)| format!("{}:{value}", algorithm.name()))
                        .unwrap_or_default();
                    Some((hex::encode(received.md5), checksum))
                }
                other => {
                    *described.lock().unwrap_or_else(PoisonError::into_inner) = other;
                    None
                }
            }
        };
        match self
            .files
            .put_part(caller, upload, number, body, describe)
            .await
        {
            Ok(part) => Ok(part),
            Err(error) => {
                let refused = described
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .or_else(|| verdict.take());
                match (refused, error) {
                    (Some(Err(refused)), _) => Err(refused),
                    (_, AppError::NotFound(_)) => Err(no_such_upload()),
                    (_, error) => Err(object_error(error)),
                }
            }
        }
    }

    pub(super) async fn upload_part_copy_(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        let number = part_number(input.part_number)?;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let (source_path, source) = self.copy_source(owner, &input.copy_source).await?;
        super::objects::copy_source_conditions(
            &source,
            input.copy_source_if_match.as_ref(),
            input.copy_source_if_none_match.as_ref(),
            input.copy_source_if_modified_since.as_ref(),
            input.copy_source_if_unmodified_since.as_ref(),
        )?;
        let range = input
            .copy_source_range
            .as_deref()
            .map(|range| copy_range(range, source.meta.size))
            .transpose()?;
        let read = self
            .files
            .read_looked_up(
                owner,
                &source_path,
                Want::content(range),
                Vec::new(),
                Some(source.meta.clone()),
            )
            .await
            .map_err(object_error)?;
        let body = match read.body {
            ReadBody::Full(body) | ReadBody::Partial { body, .. } => body,
            ReadBody::NotModified | ReadBody::Headers => {
                return Err(s3_error!(InternalError, "the read gave no content"));
            }
        };
        let verdict = Verdict::default();
        let checked = Checked::new(body.into_data_stream(), None, None, None, verdict.clone())?;
        let part = self
            .store_part(&caller, &upload, number, checked, &verdict)
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(ETag::Strong(part.etag)),
                last_modified: Some(timestamp(part.created_ms)),
                ..CopyPartResult::default()
            }),
            ..UploadPartCopyOutput::default()
        }))
    }

    pub(super) async fn complete_multipart_upload_(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let pending: Pending = serde_json::from_str(&upload.metadata).unwrap_or_default();
        let asked = input
            .multipart_upload
            .and_then(|upload| upload.parts)
            .unwrap_or_default();
        if asked.is_empty() {
            return Err(s3_error!(
                MalformedXML,
                "The XML you provided was not well-formed or did not validate against our published schema: it names no part."
            ));
        }
        let stored = self
            .files
            .multipart_parts(&upload)
            .await
            .map_err(object_error)?;
        // The order of the whole list first, as S3 checks it.
        if asked
            .windows(2)
            .any(|pair| pair[0].part_number.unwrap_or(0) >= pair[1].part_number.unwrap_or(0))
        {
            return Err(s3_error!(
                InvalidPartOrder,
                "The list of parts was not in ascending order. The parts list must be specified in order by part number."
            ));
        }
        let mut chosen: Vec<MultipartPart> = Vec::with_capacity(asked.len());
        for (index, part) in asked.iter().enumerate() {
            let number = part.part_number.unwrap_or(0);
            let found = u32::try_from(number)
                .ok()
                .and_then(|number| {
                    stored
                        .binary_search_by_key(&number, |stored| stored.number)
                        .ok()
                })
                .map(|at| &stored[at])
                .filter(|stored| {
                    part.e_tag.as_ref().is_some_and(|etag| match etag {
                        ETag::Strong(value) | ETag::Weak(value) => {
                            value.trim_matches('"') == stored.etag
                        }
                    })
                })
                .ok_or_else(|| {
                    s3_error!(
                        InvalidPart,
                        "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified entity tag might not have matched the part's entity tag."
                    )
                })?;
            if index + 1 < asked.len() && found.size < MIN_PART_SIZE {
                return Err(s3_error!(
                    EntityTooSmall,
                    "Your proposed upload is smaller than the minimum allowed object size."
                ));
            }
            // A part's checksum named in the list must be the one it came with.
            let named = [
                (Algorithm::Crc32, part.checksum_crc32.as_ref()),
                (Algorithm::Crc32c, part.checksum_crc32c.as_ref()),
                (Algorithm::Crc64Nvme, part.checksum_crc64nvme.as_ref()),
                (Algorithm::Sha1, part.checksum_sha1.as_ref()),
                (Algorithm::Sha256, part.checksum_sha256.as_ref()),
            ];
            let kept = part_checksum(found);
            for (algorithm, value) in named {
                if let Some(value) = value
                    && kept.is_none_or(|(used, kept)| used != algorithm || kept != value.as_str())
                {
                    return Err(s3_error!(
                        InvalidPart,
                        "One or more of the specified parts could not be found: a part's checksum does not match the one it was uploaded with."
                    ));
                }
            }
            chosen.push(found.clone());
        }
        let count = chosen.len();
        let part_sizes: Vec<u64> = chosen.iter().map(|part| part.size).collect();
        let mut md5s = md5::Md5::new();
        for part in &chosen {
            md5s.update(hex::decode(&part.etag).unwrap_or_default());
        }
        let etag = format!("{}-{count}", hex::encode(md5s.finalize()));
        let composite = pending
            .checksum
            .filter(|_| !pending.full_object)
            .and_then(|algorithm| {
                let mut raw = Vec::new();
                for part in &chosen {
                    let (used, value) = part_checksum(part)?;
                    if used != algorithm {
                        return None;
                    }
                    raw.extend(STANDARD.decode(value).ok()?);
                }
                Some(StoredChecksum {
                    algorithm,
                    value: format!("{}-{count}", algorithm.of(&raw)),
                    composite: true,
                })
            });
        // A composite checksum the client computed itself must agree.
        if let Some(composite) = &composite {
            let sent = match composite.algorithm {
                Algorithm::Crc32 => input.checksum_crc32.as_ref(),
                Algorithm::Crc32c => input.checksum_crc32c.as_ref(),
                Algorithm::Crc64Nvme => input.checksum_crc64nvme.as_ref(),
                Algorithm::Sha1 => input.checksum_sha1.as_ref(),
                Algorithm::Sha256 => input.checksum_sha256.as_ref(),
            };
            let bare = |value: &str| value.split('-').next().unwrap_or_default().to_owned();
            if let Some(sent) = sent
                && bare(sent) != bare(&composite.value)
            {
                return Err(s3_error!(
                    BadDigest,
                    "The checksum of the parts' checksums you specified did not match the calculated one."
                ));
            }
        }
        let whole = pending
            .checksum
            .filter(|_| pending.full_object)
            .map(|algorithm| (algorithm, Arc::new(Mutex::new(algorithm.streaming()))));
        let inspect = {
            let whole = whole.clone();
            move |bytes: &[u8]| {
                if let Some((_, hasher)) = &whole {
                    hasher
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .update(bytes);
                }
            }
        };
        let files = self.files.clone();
        let (bucket, key) = (input.bucket.clone(), input.key.clone());
        // The parts are read through an instance now, which takes a while
        // for a large object: S3 answers 200 at once and keeps the
        // connection alive with whitespace until the result (or an error)
        // is written in the body, and so does `s3s` with a future.
        // What S3 keeps of the object is made once the last part has
        // streamed by (a whole-object checksum needs every byte) and goes
        // into the file's row with it; `kept` hands it to the answer.
        let kept: Arc<Mutex<Option<ObjectInfo>>> = Arc::default();
        let describe = {
            let (kept, etag) = (kept.clone(), etag.clone());
            Describe(Box::new(move || {
                let checksum = composite.or_else(|| {
                    whole.map(|(algorithm, hasher)| StoredChecksum {
                        algorithm,
                        value: hasher
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .finish(algorithm),
                        composite: false,
                    })
                });
                let info = ObjectInfo {
                    etag,
                    meta: pending.meta,
                    headers: pending.headers,
                    checksum,
                    parts: u32::try_from(count).ok(),
                    part_sizes,
                };
                let json = info.to_json();
                *kept.lock().unwrap_or_else(PoisonError::into_inner) = Some(info);
                Some(json)
            }))
        };
        let work = async move {
            files
                .complete_multipart(&caller, &upload, chosen, inspect, describe)
                .await
                .map_err(object_error)?;
            let info = kept
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
                .unwrap_or_default();
            let fields = ChecksumFields::of(info.checksum.as_ref());
            Ok(CompleteMultipartUploadOutput {
                bucket: Some(bucket.clone()),
                key: Some(key.clone()),
                location: Some(format!("/{bucket}/{key}")),
                e_tag: Some(ETag::Strong(etag)),
                checksum_crc32: fields.crc32,
                checksum_crc32c: fields.crc32c,
                checksum_crc64nvme: fields.crc64nvme,
                checksum_sha1: fields.sha1,
                checksum_sha256: fields.sha256,
                checksum_type: fields.kind,
                ..CompleteMultipartUploadOutput::default()
            })
        };
        // In a task of its own: a client that goes away does not cut the
        // completion (and what S3 keeps of the object) short.
        let done = tokio::spawn(work);
        let answer = async move {
            done.await
                .map_err(|error| s3_error!(InternalError, "the completion failed: {error}"))?
        };
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            future: Some(Box::pin(answer)),
            ..CompleteMultipartUploadOutput::default()
        }))
    }

    pub(super) async fn abort_multipart_upload_(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        match self.files.abort_multipart(&caller, &upload.id).await {
            Ok(()) => {}
            Err(AppError::NotFound(_)) => return Err(no_such_upload()),
            Err(error) => return Err(object_error(error)),
        }
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    pub(super) async fn list_parts_(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let upload = self
            .upload_for(&caller, &input.bucket, &input.key, &input.upload_id)
            .await?;
        let pending: Pending = serde_json::from_str(&upload.metadata).unwrap_or_default();
        let marker = u32::try_from(input.part_number_marker.unwrap_or(0))
            .map_err(|_| s3_error!(InvalidArgument, "Invalid part number marker"))?;
        let max_parts =
            usize::try_from(input.max_parts.unwrap_or(1000).clamp(0, 1000)).unwrap_or(1000);
        let stored = self
            .files
            .multipart_parts(&upload)
            .await
            .map_err(object_error)?;
        let after: Vec<&MultipartPart> =
            stored.iter().filter(|part| part.number > marker).collect();
        let truncated = after.len() > max_parts;
        let page = &after[..after.len().min(max_parts)];
        let parts = page
            .iter()
            .map(|part| {
                let fields = part_fields(part);
                Part {
                    part_number: i32::try_from(part.number).ok(),
                    size: i64::try_from(part.size).ok(),
                    e_tag: Some(ETag::Strong(part.etag.clone())),
                    last_modified: Some(timestamp(part.created_ms)),
                    checksum_crc32: fields.crc32,
                    checksum_crc32c: fields.crc32c,
                    checksum_crc64nvme: fields.crc64nvme,
                    checksum_sha1: fields.sha1,
                    checksum_sha256: fields.sha256,
                }
            })
            .collect();
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload.id),
            part_number_marker: i32::try_from(marker).ok(),
            next_part_number_marker: page
                .last()
                .map_or(Some(marker), |part| Some(part.number))
                .and_then(|number| i32::try_from(number).ok()),
            max_parts: Some(i32::try_from(max_parts).unwrap_or(1000)),
            is_truncated: Some(truncated),
            parts: Some(parts),
            checksum_algorithm: pending
                .checksum
                .map(|algorithm| ChecksumAlgorithm::from_static(algorithm.name())),
            storage_class: Some(s3s::dto::StorageClass::from_static(
                s3s::dto::StorageClass::STANDARD,
            )),
            ..ListPartsOutput::default()
        }))
    }

    pub(super) async fn list_multipart_uploads_(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        let root = format!("{}/", input.bucket);
        let prefix = input.prefix.clone().unwrap_or_default();
        let from = format!("{root}{prefix}");
        let upper = format!("{}0", input.bucket);
        let max = usize::try_from(input.max_uploads.unwrap_or(1000).clamp(0, 1000)).unwrap_or(1000);
        // An owner has at most a few dozen unfinished uploads: all of them
        // under the prefix fit one read.
        let uploads = self
            .files
            .multipart_uploads(&caller, &from, &upper, 10_000)
            .await
            .map_err(object_error)?;
        let key_marker = input.key_marker.clone().unwrap_or_default();
        let id_marker = input
            .upload_id_marker
            .clone()
            .filter(|_| !key_marker.is_empty());
        let delimiter = input
            .delimiter
            .clone()
            .filter(|delimiter| !delimiter.is_empty());
        // Entries in order, each an upload or a common prefix, after the
        // markers: an upload of the marker's key counts only past the
        // upload id marker (by the same order as the listing), a prefix
        // only past the key marker.
        let mut listed = Vec::new();
        let mut prefixes: Vec<String> = Vec::new();
        let mut truncated = false;
        let mut last: Option<(String, Option<String>)> = None;
        let mut past_id_marker = false;
        for upload in uploads {
            let key = upload.path[root.len()..].to_owned();
            if !key.starts_with(&prefix) {
                continue;
            }
            let common = delimiter.as_deref().and_then(|delimiter| {
                key[prefix.len()..]
                    .find(delimiter)
                    .map(|at| key[..prefix.len() + at + delimiter.len()].to_owned())
            });
            if let Some(common) = common {
                let seen = prefixes.last() == Some(&common)
                    || (!key_marker.is_empty() && common.as_str() <= key_marker.as_str());
                if seen {
                    continue;
                }
                if listed.len() + prefixes.len() == max {
                    truncated = true;
                    break;
                }
                last = Some((common.clone(), None));
                prefixes.push(common);
                continue;
            }
            if !key_marker.is_empty() {
                if key.as_str() < key_marker.as_str() {
                    continue;
                }
                if key == key_marker {
                    match &id_marker {
                        None => continue,
                        Some(marker) if !past_id_marker => {
                            past_id_marker = marker == &upload.id;
                            continue;
                        }
                        Some(_) => {}
                    }
                }
            }
            if listed.len() + prefixes.len() == max {
                truncated = true;
                break;
            }
            last = Some((key.clone(), Some(upload.id.clone())));
            listed.push((key, upload));
        }
        let next = last;
        let uploads = listed
            .into_iter()
            .map(|(key, upload)| MultipartUpload {
                key: Some(key),
                upload_id: Some(upload.id),
                initiated: Some(timestamp(upload.created_ms)),
                storage_class: Some(s3s::dto::StorageClass::from_static(
                    s3s::dto::StorageClass::STANDARD,
                )),
                ..MultipartUpload::default()
            })
            .collect();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: Some(prefix),
            delimiter: input.delimiter,
            key_marker: Some(key_marker),
            upload_id_marker: input.upload_id_marker,
            max_uploads: Some(i32::try_from(max).unwrap_or(1000)),
            is_truncated: Some(truncated),
            next_key_marker: truncated
                .then(|| next.clone().map(|(key, _)| key))
                .flatten(),
            next_upload_id_marker: truncated.then(|| next.and_then(|(_, id)| id)).flatten(),
            uploads: Some(uploads),
            common_prefixes: Some(
                prefixes
                    .into_iter()
                    .map(|prefix| CommonPrefix {
                        prefix: Some(prefix),
                    })
                    .collect(),
            ),
            ..ListMultipartUploadsOutput::default()
        }))
    }
}

/// A part number as S3 allows it.
fn part_number(number: i32) -> S3Result<u32> {
    u32::try_from(number)
        .ok()
        .filter(|number| (1..=MAX_PARTS).contains(number))
        .ok_or_else(|| {
            S3Error::with_message(
                S3ErrorCode::InvalidArgument,
                format!("Part number must be an integer between 1 and {MAX_PARTS}, inclusive"),
            )
        })
}

/// `x-amz-copy-source-range: bytes=FIRST-LAST` over a source of `size`.
fn copy_range(range: &str, size: u64) -> S3Result<ByteRange> {
    let invalid = || {
        s3_error!(
            InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"
        )
    };
    let (first, last) = range
        .trim()
        .strip_prefix("bytes=")
        .and_then(|span| span.split_once('-'))
        .ok_or_else(invalid)?;
    let first: u64 = first.parse().map_err(|_| invalid())?;
    let last: u64 = last.parse().map_err(|_| invalid())?;
    if first > last {
        return Err(invalid());
    }
    if last >= size {
        return Err(s3_error!(
            InvalidRange,
            "The requested range is not satisfiable"
        ));
    }
    Ok(ByteRange::FirstLast((first, Some(last))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_range_is_inclusive_and_within_the_source() {
        assert!(matches!(
            copy_range("bytes=0-9", 10),
            Ok(ByteRange::FirstLast((0, Some(9))))
        ));
        assert!(copy_range("bytes=0-10", 10).is_err());
        assert!(copy_range("bytes=5-4", 10).is_err());
        assert!(copy_range("0-4", 10).is_err());
        assert!(copy_range("bytes=-4", 10).is_err());
    }

    #[test]
    fn part_numbers_are_one_to_ten_thousand() {
        assert_eq!(part_number(1).ok(), Some(1));
        assert_eq!(part_number(10_000).ok(), Some(10_000));
        assert!(part_number(0).is_err());
        assert!(part_number(10_001).is_err());
        assert!(part_number(-1).is_err());
    }
}
