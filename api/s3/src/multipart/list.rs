//! `ListParts` and `ListMultipartUploads`: an upload's parts, and the
//! unfinished uploads of a bucket, in S3's pages.

use s3s::dto::{
    ChecksumAlgorithm, CommonPrefix, ETag, ListMultipartUploadsInput, ListMultipartUploadsOutput,
    ListPartsInput, ListPartsOutput, MultipartUpload, Part,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::uploads::MultipartPart;

use crate::checksum::{ChecksumFields, with_checksums};
use crate::error::object_error;
use crate::{S3Api, caller, timestamp};

use super::{Pending, part_fields, upload_of};

impl S3Api {
    pub(crate) async fn list_parts_(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let (_, input, upload) = upload_of!(self, req);
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
                with_checksums!(
                    Part {
                        part_number: i32::try_from(part.number).ok(),
                        size: i64::try_from(part.size).ok(),
                        e_tag: Some(ETag::Strong(part.etag.clone())),
                        last_modified: Some(timestamp(part.created_ms)),
                        ..Part::default()
                    },
                    fields,
                    without type
                )
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

    pub(crate) async fn list_multipart_uploads_(
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
