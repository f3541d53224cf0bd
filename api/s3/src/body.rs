//! The checks a body passes on its way in: `Content-MD5`, and the
//! checksum its request declares ([`Declared`]).
//!
//! A body is checked as it streams to its instance ([`BodyCheck`], run
//! by the service): a mismatch found at its end makes the stream fail
//! instead of end, so the upload stores nothing, and the service hands
//! the refusal back (`BadDigest`) for the adapter to answer.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use md5::Digest as _;
use s3s::checksum::ChecksumHasher;
use s3s::{S3Error, s3_error};

use file_service::Inspect;

use super::checksum::{Algorithm, Declared};

/// What a body turned out to be once read to its end.
#[derive(Debug, Clone)]
pub(super) struct Received {
    pub(super) md5: [u8; 16],
    pub(super) checksum: Option<(Algorithm, String)>,
}

/// The checks of a body against `Content-MD5` and a declared checksum: the
/// service runs it over the body as it streams by ([`Inspect`]).
pub(super) struct BodyCheck {
    md5: Option<md5::Md5>,
    hasher: Option<(Algorithm, ChecksumHasher)>,
    want_md5: Option<[u8; 16]>,
    declared: Option<Declared>,
    trailers: Option<s3s::TrailingHeaders>,
}

impl BodyCheck {
    pub(super) fn new(
        content_md5: Option<&str>,
        declared: Option<Declared>,
        trailers: Option<s3s::TrailingHeaders>,
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
            md5: Some(md5::Md5::new()),
            hasher: declared
                .as_ref()
                .map(|declared| (declared.algorithm, declared.algorithm.hasher())),
            want_md5,
            declared,
            trailers,
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
                let computed = algorithm.finish(hasher);
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

impl Inspect for BodyCheck {
    type Passed = Received;
    type Refused = S3Error;

    fn chunk(&mut self, bytes: &[u8]) {
        if let Some(md5) = &mut self.md5 {
            md5.update(bytes);
        }
        if let Some((_, hasher)) = &mut self.hasher {
            hasher.update(bytes);
        }
    }

    fn failed(&mut self, error: &str) -> Option<S3Error> {
        refusal_of(error)
    }

    fn ended(&mut self) -> Result<Received, S3Error> {
        self.finish()
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

/// What a request says its body must match: its declared checksum and the
/// trailers that may carry it. Read first, as S3 does: a malformed
/// declaration is refused before the bucket or the upload is looked at.
pub(super) struct BodyChecks {
    declared: Option<Declared>,
    trailers: Option<s3s::TrailingHeaders>,
}

/// [`BodyChecks::of`] a `PutObject` or `UploadPart` request (the same
/// checksum fields in two types).
macro_rules! body_checks_of {
    ($req:expr) => {
        BodyChecks::of(
            sent_checksums!($req.input),
            $req.input.checksum_algorithm.as_ref(),
            &$req.headers,
            $req.trailing_headers.clone(),
        )
    };
}
pub(super) use body_checks_of;

impl BodyChecks {
    /// The checks an operation's checksum fields (`sent`, see
    /// `sent_checksums!`), its named algorithm, its headers and its
    /// trailers ask for.
    pub(super) fn of(
        sent: [(Algorithm, Option<&String>); 5],
        algorithm: Option<&s3s::dto::ChecksumAlgorithm>,
        headers: &axum::http::HeaderMap,
        trailers: Option<s3s::TrailingHeaders>,
    ) -> Result<Self, S3Error> {
        Ok(Self {
            declared: super::checksum::declared_checksum(sent, algorithm, headers)?,
            trailers,
        })
    }

    /// `body` (none: an empty one), and its checks against `content_md5`
    /// and the declared checksum: what `PutObject` and `UploadPart` store.
    pub(super) fn check(
        self,
        body: Option<s3s::dto::StreamingBlob>,
        content_md5: Option<&str>,
    ) -> Result<(s3s::dto::StreamingBlob, BodyCheck), S3Error> {
        let check = BodyCheck::new(content_md5, self.declared, self.trailers)?;
        let body = body.unwrap_or_else(|| {
            s3s::dto::StreamingBlob::wrap(futures_util::stream::empty::<
                Result<Bytes, std::io::Error>,
            >())
        });
        Ok((body, check))
    }
}
