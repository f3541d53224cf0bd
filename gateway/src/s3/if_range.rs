//! `If-Range` on `GetObject`. The client names the ETag this S3 sent,
//! which is the MD5 kept in the object's S3 info (or its SHA-256 when it
//! has none), not the SHA-256 the instance checks; so the tag is compared
//! here with the object as looked up, and handed on as that object's
//! content tag. The instance then checks it against the file it opens: an
//! object replaced in between is sent whole, never as a tail of the new
//! content under the old validator.

use crate::runtime::IfRange;

use super::objects::Found;

/// The validator to hand the instance for `asked`, the client's `If-Range`,
/// given `found`, the object as looked up: a tag that matches the ETag S3
/// sends for it becomes its SHA-256; any other tag never matches; a date is
/// compared with `Last-Modified` by the instance as on every protocol.
pub(super) fn validator(asked: IfRange, found: &Found) -> IfRange {
    match asked {
        IfRange::EntityTag(tag) if tag == found.etag => {
            IfRange::EntityTag(found.meta.sha256.clone())
        }
        IfRange::EntityTag(_) => IfRange::Never,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use volume::FileMeta;

    use super::*;

    fn found(etag: &str) -> Found {
        Found {
            meta: FileMeta {
                path: "bucket/key".into(),
                size: 20,
                sha256: "sha".into(),
                blake3: None,
                content_type: "text/plain".into(),
                created_ms: 0,
                modified_ms: 0,
                s3_info: None,
            },
            info: None,
            etag: etag.into(),
        }
    }

    #[test]
    fn the_sent_etag_becomes_the_content_tag() {
        let object = found("md5");
        assert_eq!(
            validator(IfRange::EntityTag("md5".into()), &object),
            IfRange::EntityTag("sha".into())
        );
        // The SHA-256 is not the ETag S3 sent for this object.
        assert_eq!(
            validator(IfRange::EntityTag("sha".into()), &object),
            IfRange::Never
        );
        assert_eq!(validator(IfRange::Date(7), &object), IfRange::Date(7));
        assert_eq!(validator(IfRange::Never, &object), IfRange::Never);
    }
}
