//! What S3 keeps of an object beside its content ([`ObjectInfo`], the
//! JSON in the file row's `s3_info`), and the checks a body passes on its
//! way in: `Content-MD5`, and an `x-amz-checksum-*` sent as a header or as
//! a trailer after the body (what current SDKs send by default).
//!
//! A body is checked as it streams to its instance: a mismatch found at
//! its end makes the stream fail instead of end, so the upload stores
//! nothing, and the adapter answers `BadDigest`.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures_util::Stream;
use md5::Digest as _;
use s3s::checksum::ChecksumHasher;
use s3s::dto::{self, ChecksumAlgorithm, ChecksumType};
use s3s::{S3Error, s3_error};
use serde::{Deserialize, Serialize};

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
}

/// A checksum kept with an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct StoredChecksum {
    pub(super) algorithm: Algorithm,
    /// Base64, with `-N` for a composite one.
    pub(super) value: String,
    /// Of the whole content, or composed of the parts' checksums.
    pub(super) composite: bool,
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

/// The checksum algorithms S3 defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Algorithm {
    Crc32,
    Crc32c,
    Crc64Nvme,
    Sha1,
    Sha256,
}

impl Algorithm {
    pub(super) fn parse(name: &str) -> Option<Self> {
        Some(match name.to_ascii_uppercase().as_str() {
            "CRC32" => Self::Crc32,
            "CRC32C" => Self::Crc32c,
            "CRC64NVME" => Self::Crc64Nvme,
            "SHA1" => Self::Sha1,
            "SHA256" => Self::Sha256,
            _ => return None,
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Crc32 => ChecksumAlgorithm::CRC32,
            Self::Crc32c => ChecksumAlgorithm::CRC32C,
            Self::Crc64Nvme => ChecksumAlgorithm::CRC64NVME,
            Self::Sha1 => ChecksumAlgorithm::SHA1,
            Self::Sha256 => ChecksumAlgorithm::SHA256,
        }
    }

    /// The header (and trailer) that carries it.
    pub(super) fn header(self) -> String {
        format!("x-amz-checksum-{}", self.name().to_ascii_lowercase())
    }

    pub(super) fn hasher(self) -> ChecksumHasher {
        let mut hasher = ChecksumHasher::default();
        match self {
            Self::Crc32 => hasher.crc32 = Some(Default::default()),
            Self::Crc32c => hasher.crc32c = Some(Default::default()),
            Self::Crc64Nvme => hasher.crc64nvme = Some(Default::default()),
            Self::Sha1 => hasher.sha1 = Some(Default::default()),
            Self::Sha256 => hasher.sha256 = Some(Default::default()),
        }
        hasher
    }

    /// The base64 checksum of `bytes`.
    pub(super) fn of(self, bytes: &[u8]) -> String {
        let mut hasher = self.hasher();
        hasher.update(bytes);
        self.finish(hasher)
    }

    /// The base64 checksum `hasher` (made by [`Algorithm::hasher`]) saw.
    pub(super) fn finish(self, hasher: ChecksumHasher) -> String {
        self.pick(hasher.finalize()).unwrap_or_default()
    }

    fn pick(self, checksum: dto::Checksum) -> Option<String> {
        match self {
            Self::Crc32 => checksum.checksum_crc32,
            Self::Crc32c => checksum.checksum_crc32c,
            Self::Crc64Nvme => checksum.checksum_crc64nvme,
            Self::Sha1 => checksum.checksum_sha1,
            Self::Sha256 => checksum.checksum_sha256,
        }
    }
}

/// A whole-object checksum computed as bytes stream by.
pub(super) struct Streaming(ChecksumHasher);

impl Streaming {
    pub(super) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    pub(super) fn finish(&mut self, algorithm: Algorithm) -> String {
        algorithm.finish(std::mem::take(&mut self.0))
    }
}

impl Algorithm {
    pub(super) fn streaming(self) -> Streaming {
        Streaming(self.hasher())
    }
}

/// The checksum fields of an answer, for `checksum`.
#[derive(Debug, Default)]
pub(super) struct ChecksumFields {
    pub(super) crc32: Option<String>,
    pub(super) crc32c: Option<String>,
    pub(super) crc64nvme: Option<String>,
    pub(super) sha1: Option<String>,
    pub(super) sha256: Option<String>,
    pub(super) kind: Option<ChecksumType>,
}

impl ChecksumFields {
    pub(super) fn of(checksum: Option<&StoredChecksum>) -> Self {
        let mut fields = Self::default();
        if let Some(checksum) = checksum {
            let value = Some(checksum.value.clone());
            match checksum.algorithm {
                Algorithm::Crc32 => fields.crc32 = value,
                Algorithm::Crc32c => fields.crc32c = value,
                Algorithm::Crc64Nvme => fields.crc64nvme = value,
                Algorithm::Sha1 => fields.sha1 = value,
                Algorithm::Sha256 => fields.sha256 = value,
            }
            fields.kind = Some(ChecksumType::from_static(if checksum.composite {
                ChecksumType::COMPOSITE
            } else {
                ChecksumType::FULL_OBJECT
            }));
        }
        fields
    }
}

/// The five `x-amz-checksum-*` values an operation's input (`PutObject`,
/// `UploadPart`) carries, by algorithm, for [`declared_checksum`].
macro_rules! sent_checksums {
    ($input:expr) => {
        [
            (Algorithm::Crc32, $input.checksum_crc32.as_ref()),
            (Algorithm::Crc32c, $input.checksum_crc32c.as_ref()),
            (Algorithm::Crc64Nvme, $input.checksum_crc64nvme.as_ref()),
            (Algorithm::Sha1, $input.checksum_sha1.as_ref()),
            (Algorithm::Sha256, $input.checksum_sha256.as_ref()),
        ]
    };
}
pub(super) use sent_checksums;

/// Set an answer's checksum fields, and its checksum type, from
/// [`ChecksumFields`].
macro_rules! answer_checksums {
    ($output:expr, $fields:expr) => {{
        let fields: ChecksumFields = $fields;
        $output.checksum_crc32 = fields.crc32;
        $output.checksum_crc32c = fields.crc32c;
        $output.checksum_crc64nvme = fields.crc64nvme;
        $output.checksum_sha1 = fields.sha1;
        $output.checksum_sha256 = fields.sha256;
        $output.checksum_type = fields.kind;
    }};
}
pub(super) use answer_checksums;

/// The checksum a request declares for its body: the algorithm, and the
/// value if it came as a header (else it comes as a trailer, or not at
/// all: then it is computed and kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Declared {
    pub(super) algorithm: Algorithm,
    pub(super) value: Option<String>,
    /// The value was announced to follow the body (`x-amz-trailer`).
    pub(super) trailer: bool,
}

/// The checksum declared by an input's fields and the request's headers.
pub(super) fn declared_checksum(
    values: [(Algorithm, Option<&String>); 5],
    algorithm: Option<&ChecksumAlgorithm>,
    headers: &axum::http::HeaderMap,
) -> Result<Option<Declared>, S3Error> {
    let mut sent = values
        .into_iter()
        .filter_map(|(algorithm, value)| value.map(|value| (algorithm, value.clone())));
    if let Some((algorithm, value)) = sent.next() {
        if sent.next().is_some() {
            return Err(s3_error!(
                InvalidRequest,
                "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed."
            ));
        }
        return Ok(Some(Declared {
            algorithm,
            value: Some(value),
            trailer: false,
        }));
    }
    let trailer = headers
        .get("x-amz-trailer")
        .and_then(|value| value.to_str().ok())
        .and_then(|name| name.trim().strip_prefix("x-amz-checksum-"))
        .and_then(Algorithm::parse);
    let named = algorithm.map(|algorithm| {
        Algorithm::parse(algorithm.as_str()).ok_or_else(|| {
            s3_error!(
                InvalidRequest,
                "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]"
            )
        })
    });
    Ok(match (trailer, named) {
        (Some(algorithm), _) => Some(Declared {
            algorithm,
            value: None,
            trailer: true,
        }),
        (None, Some(named)) => Some(Declared {
            algorithm: named?,
            value: None,
            trailer: false,
        }),
        (None, None) => None,
    })
}

/// What a body turned out to be once read to its end.
#[derive(Debug, Clone)]
pub(super) struct Received {
    pub(super) md5: [u8; 16],
    pub(super) checksum: Option<(Algorithm, String)>,
}

/// How checking a body went: read in the end by the adapter.
#[derive(Debug, Clone, Default)]
pub(super) struct Verdict(Arc<Mutex<Option<Result<Received, S3Error>>>>);

impl Verdict {
    /// What the body was, if it was read to its end and passed its checks
    /// (left for [`Verdict::take`]).
    pub(super) fn received(&self) -> Option<Received> {
        match &*self.0.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(Ok(received)) => Some(received.clone()),
            _ => None,
        }
    }

    /// What the body was, or why it was refused; `None` if it was not read
    /// to its end.
    pub(super) fn take(&self) -> Option<Result<Received, S3Error>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn set(&self, verdict: Result<Received, S3Error>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(verdict);
    }
}

/// A body stream checked against `Content-MD5` and a declared checksum.
pub(super) struct Checked<S> {
    inner: S,
    md5: Option<md5::Md5>,
    hasher: Option<(Algorithm, ChecksumHasher)>,
    want_md5: Option<[u8; 16]>,
    declared: Option<Declared>,
    trailers: Option<s3s::TrailingHeaders>,
    verdict: Verdict,
}

impl<S> Checked<S> {
    pub(super) fn new(
        inner: S,
        content_md5: Option<&str>,
        declared: Option<Declared>,
        trailers: Option<s3s::TrailingHeaders>,
        verdict: Verdict,
    ) -> Result<Self, S3Error> {
        let want_md5 = content_md5
            .map(|sent| {
                STANDARD
                    .decode(sent.trim())
                    .ok()
                    .and_then(|bytes| <[u8; 16]>::try_from(bytes).ok())
                    .ok_or_else(|| {
                        s3_error!(InvalidDigest, "The Content-MD5 you specified was invalid.")
                    })
            })
            .transpose()?;
        Ok(Self {
            inner,
            md5: Some(md5::Md5::new()),
            hasher: declared
                .as_ref()
                .map(|declared| (declared.algorithm, declared.algorithm.hasher())),
            want_md5,
            declared,
            trailers,
            verdict,
        })
    }

    /// The verdict at the body's end.
    fn finish(&mut self) -> Result<Received, S3Error> {
        let md5: [u8; 16] = self.md5.take().unwrap_or_default().finalize().into();
        if self.want_md5.is_some_and(|want| want != md5) {
            return Err(s3_error!(
                BadDigest,
                "The Content-MD5 you specified did not match what we received."
            ));
        }
        let checksum = match (self.hasher.take(), self.declared.take()) {
            (Some((algorithm, hasher)), Some(declared)) => {
                let computed = algorithm.pick(hasher.finalize()).unwrap_or_default();
                let announced = declared.trailer;
                let sent = declared.value.or_else(|| {
                    let header = algorithm.header();
                    self.trailers.as_ref().and_then(|trailers| {
                        trailers
                            .read(|headers| {
                                headers
                                    .get(header.as_str())
                                    .and_then(|value| value.to_str().ok())
                                    .map(str::to_owned)
                            })
                            .flatten()
                    })
                });
                if announced && sent.is_none() {
                    return Err(S3Error::with_message(
                        s3s::S3ErrorCode::InvalidRequest,
                        format!(
                            "The trailing checksum {} was announced but not sent.",
                            algorithm.header()
                        ),
                    ));
                }
                if sent.as_ref().is_some_and(|sent| sent.trim() != computed) {
                    return Err(S3Error::with_message(
                        s3s::S3ErrorCode::BadDigest,
                        format!(
                            "The {} you specified did not match the calculated checksum.",
                            algorithm.name()
                        ),
                    ));
                }
                Some((algorithm, computed))
            }
            _ => None,
        };
        Ok(Received { md5, checksum })
    }
}

impl<S, E> Stream for Checked<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(bytes))) => {
                if let Some(md5) = &mut this.md5 {
                    md5.update(&bytes);
                }
                if let Some((_, hasher)) = &mut this.hasher {
                    hasher.update(&bytes);
                }
                Poll::Ready(Some(Ok(bytes)))
            }
            Poll::Ready(Some(Err(error))) => {
                let text = error.to_string();
                if let Some(refused) = refusal_of(&text) {
                    this.verdict.set(Err(refused));
                }
                Poll::Ready(Some(Err(std::io::Error::other(text))))
            }
            Poll::Ready(None) => {
                if this.md5.is_none() {
                    return Poll::Ready(None);
                }
                let verdict = this.finish();
                let failed = verdict.is_err();
                this.verdict.set(verdict);
                if failed {
                    Poll::Ready(Some(Err(std::io::Error::other(
                        "the body does not match its checksum",
                    ))))
                } else {
                    Poll::Ready(None)
                }
            }
        }
    }
}

/// What S3 answers for a body `s3s` refused as it decoded it (its error
/// types are not public, their messages are): a chunk whose signature
/// fails, a body whose SHA-256 is not the signed one, a cut chunk.
fn refusal_of(error: &str) -> Option<S3Error> {
    if error.contains("SignatureMismatch") {
        Some(s3_error!(
            SignatureDoesNotMatch,
            "The request signature we calculated does not match the signature you provided (a chunk of the body)."
        ))
    } else if error.contains("Sha256Mismatch") {
        let mut error = S3Error::with_message(
            s3s::S3ErrorCode::Custom("XAmzContentSHA256Mismatch".into()),
            "The provided 'x-amz-content-sha256' header does not match what was computed.",
        );
        error.set_status_code(axum::http::StatusCode::BAD_REQUEST);
        Some(error)
    } else if error.contains("AwsChunkedStreamError") || error.contains("UploadStreamError") {
        Some(s3_error!(
            IncompleteBody,
            "You did not provide the number of bytes specified by the Content-Length HTTP header, or the chunked body is malformed."
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_are_the_ones_s3_documents() {
        // "hello world", as S3's documentation and the AWS SDKs give them.
        assert_eq!(Algorithm::Crc32.of(b"hello world"), "DUoRhQ==");
        assert_eq!(Algorithm::Crc32c.of(b"hello world"), "yZRlqg==");
        assert_eq!(
            Algorithm::Sha256.of(b"hello world"),
            "uU0nuZNNPgilLlLX2n2r+sSE7+N6U4DukIj3rOLvzek="
        );
    }

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
