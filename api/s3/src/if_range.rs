//! `If-Range` on `GetObject`. The client names the ETag this S3 sent,
//! which is the MD5 kept in the object's S3 info (or its SHA-256 when it
//! has none), not the SHA-256 the instance checks; so the tag is compared
//! here with the object as looked up, and handed on as that object's
//! content tag. The instance then checks it against the file it opens: an
//! object replaced in between is sent whole, never as a tail of the new
//! content under the old validator.

use storage_host::runtime::IfRange;

/// The validator to hand the instance for `asked`, the client's `If-Range`,
/// given the object as looked up (the `etag` S3 sends for it and its
/// `sha256`): a tag that matches the ETag becomes the SHA-256; any other
/// tag never matches; a date is compared with `Last-Modified` by the
/// instance as on every protocol.
pub(super) fn validator(asked: IfRange, etag: &str, sha256: &str) -> IfRange {
    match asked {
        IfRange::EntityTag(tag) if tag == etag => IfRange::EntityTag(sha256.to_owned()),
        IfRange::EntityTag(_) => IfRange::Never,
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sent_etag_becomes_the_content_tag() {
        let validate = |asked| validator(asked, "md5", "sha");
        assert_eq!(
            validate(IfRange::EntityTag("md5".into())),
            IfRange::EntityTag("sha".into())
        );
        // The SHA-256 is not the ETag S3 sent for this object.
        assert_eq!(validate(IfRange::EntityTag("sha".into())), IfRange::Never);
        assert_eq!(validate(IfRange::Date(7)), IfRange::Date(7));
        assert_eq!(validate(IfRange::Never), IfRange::Never);
    }
}
