//! What S3 keeps of an object beside its content ([`ObjectInfo`], the
//! JSON in the file row's `s3_info`): its ETag, user metadata, the headers
//! it is answered with, its checksum and its parts.

use std::collections::BTreeMap;

use s3s::dto;
use s3s::{S3Error, s3_error};
use serde::{Deserialize, Serialize};

use super::body::Received;
use super::checksum::StoredChecksum;

/// The hex MD5 of no bytes: the ETag of an empty object (a folder marker).
pub(super) const EMPTY_MD5: &str = "d41d8cd98f00b204e9800998ecf8427e";

/// What S3 keeps of an object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ObjectInfo {
    /// The ETag without quotes: the hex MD5 of the content, or for a
    /// multipart upload the MD5 of its parts' MD5s and `-N`.
    pub(super) etag: String,
    /// `x-amz-meta-*`, names lowercase without the prefix.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) meta: BTreeMap<String, String>,
    /// Headers stored to be answered with: `cache-control`,
    /// `content-disposition`, `content-encoding`, `content-language`,
    /// `expires`, and `content-type` when a copy replaced it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) checksum: Option<StoredChecksum>,
    /// Parts of a multipart upload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) parts: Option<u32>,
    /// Their sizes, in order: what `?partNumber=` reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) part_sizes: Vec<u64>,
    /// The object's tags (`x-amz-tagging`, `PutObjectTagging`), in the
    /// order they were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) tags: Vec<(String, String)>,
}

impl ObjectInfo {
    /// The info kept in a row, if any (and readable).
    pub(super) fn of(meta: &volume::FileMeta) -> Option<Self> {
        meta.s3_info
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
    }

    /// What S3 keeps of an object put in one request.
    pub(super) fn put(
        received: &Received,
        meta: BTreeMap<String, String>,
        headers: BTreeMap<String, String>,
    ) -> Self {
        Self {
            etag: hex::encode(received.md5),
            meta,
            headers,
            checksum: received
                .checksum
                .clone()
                .map(|(algorithm, value)| StoredChecksum {
                    algorithm,
                    value,
                    composite: false,
                }),
            ..Self::default()
        }
    }

    pub(super) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Headers stored with the object, from a request's input.
    pub(super) fn stored_headers(
        cache_control: Option<&String>,
        content_disposition: Option<&String>,
        content_encoding: Option<&String>,
        content_language: Option<&String>,
        expires: Option<&dto::Timestamp>,
    ) -> BTreeMap<String, String> {
        let mut headers = BTreeMap::new();
        // `aws-chunked` names how the request was sent, not the object.
        let content_encoding = content_encoding
            .map(|encoding| {
                encoding
                    .split(',')
                    .map(str::trim)
                    .filter(|coding| {
                        !coding.eq_ignore_ascii_case("aws-chunked") && !coding.is_empty()
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|encoding| !encoding.is_empty());
        for (name, value) in [
            ("cache-control", cache_control),
            ("content-disposition", content_disposition),
            ("content-encoding", content_encoding.as_ref()),
            ("content-language", content_language),
        ] {
            if let Some(value) = value {
                headers.insert(name.to_owned(), value.clone());
            }
        }
        if let Some(expires) = expires {
            let mut text = Vec::new();
            if expires
                .format(dto::TimestampFormat::HttpDate, &mut text)
                .is_ok()
            {
                headers.insert(
                    "expires".to_owned(),
                    String::from_utf8_lossy(&text).into_owned(),
                );
            }
        }
        headers
    }
}

/// What S3 stores an object put without a `Content-Type` as.
pub(super) const DEFAULT_CONTENT_TYPE: &str = "binary/octet-stream";

/// Most bytes of user metadata (`x-amz-meta-*` names and values) an object
/// may have, as S3 allows.
const MAX_METADATA_BYTES: usize = 2 << 10;

/// Refuse user metadata past S3's 2 KiB (`MetadataTooLarge`).
pub(super) fn check_metadata_size(meta: &BTreeMap<String, String>) -> Result<(), S3Error> {
    let bytes: usize = meta
        .iter()
        .map(|(name, value)| name.len() + value.len())
        .sum();
    if bytes > MAX_METADATA_BYTES {
        return Err(s3_error!(
            MetadataTooLarge,
            "Your metadata headers exceed the maximum allowed metadata size."
        ));
    }
    Ok(())
}

/// The ETag S3 gives `meta`: the MD5 S3 kept, else the SHA-256 (a file
/// stored through another protocol).
pub(super) fn etag_of(meta: &volume::FileMeta, info: Option<&ObjectInfo>) -> String {
    info.map_or_else(|| meta.sha256.clone(), |info| info.etag.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aws_chunked_is_how_a_body_came_not_what_it_is() {
        let stored = |encoding: &str| {
            ObjectInfo::stored_headers(None, None, Some(&encoding.to_owned()), None, None)
                .get("content-encoding")
                .cloned()
        };
        assert_eq!(stored("aws-chunked"), None);
        assert_eq!(stored("aws-chunked, gzip").as_deref(), Some("gzip"));
        assert_eq!(stored("gzip").as_deref(), Some("gzip"));
    }

    #[test]
    fn object_info_round_trips_and_skips_what_is_empty() {
        let info = ObjectInfo {
            etag: "abc".into(),
            ..ObjectInfo::default()
        };
        assert_eq!(info.to_json(), r#"{"etag":"abc"}"#);
        let back: ObjectInfo = serde_json::from_str(&info.to_json()).unwrap_or_default();
        assert_eq!(back, info);
    }
}
