//! S3's checksums (`x-amz-checksum-*`): the algorithms, the one a request
//! declares for its body (as a header, or as a trailer after the body:
//! what current SDKs send by default), and an answer's checksum fields.

use s3s::checksum::ChecksumHasher;
use s3s::dto::{self, ChecksumAlgorithm, ChecksumType};
use s3s::{S3Error, s3_error};
use serde::{Deserialize, Serialize};

/// A checksum kept with an object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct StoredChecksum {
    pub(super) algorithm: Algorithm,
    /// Base64, with `-N` for a composite one.
    pub(super) value: String,
    /// Of the whole content, or composed of the parts' checksums.
    pub(super) composite: bool,
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

/// `output` (an `s3s` answer, or a part of one) with its `checksum_*`
/// fields set from a [`ChecksumFields`]; `without type` for the answers
/// that have no `checksum_type` (a part's).
macro_rules! with_checksums {
    ($output:expr, $fields:expr) => {{
        let fields: ChecksumFields = $fields;
        let kind = fields.kind.clone();
        let mut output = with_checksums!($output, fields, without type);
        output.checksum_type = kind;
        output
    }};
    ($output:expr, $fields:expr, without type) => {{
        let fields: ChecksumFields = $fields;
        let mut output = $output;
        output.checksum_crc32 = fields.crc32;
        output.checksum_crc32c = fields.crc32c;
        output.checksum_crc64nvme = fields.crc64nvme;
        output.checksum_sha1 = fields.sha1;
        output.checksum_sha256 = fields.sha256;
        output
    }};
}
pub(super) use with_checksums;

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
}
