//! `PutObject`: a body stored as the file of its key, checked against
//! `Content-MD5` and any checksum on its way, its MD5 kept as the ETag.

use std::collections::BTreeMap;

use s3s::dto::{ETag, ETagCondition, PutObjectInput, PutObjectOutput};
use s3s::{S3Error, S3Request, S3Response, S3Result, s3_error};
use volume::{NULL_VERSION, Prefix};

use file_service::ServiceError;
use file_service::{LockTokens, Refusal, StoreOptions};

use super::body::{BodyChecks, Received, body_checks_of};
use super::checksum::{Algorithm, ChecksumFields, sent_checksums, with_checksums};
use super::conditions::{matches, precondition_failed};
use super::defaults::refuse_granting_acl;
use super::error::object_error;
use super::info::EMPTY_MD5;
use super::info::{DEFAULT_CONTENT_TYPE, ObjectInfo, check_metadata_size};
use super::object_lock::{asked_lock, require_body_check};
use super::tagging::tags_of_header;
use super::{S3Api, caller, object_path};

impl S3Api {
    /// `PutObject`: the body stored as the file of its key, checked on its
    /// way; a key ending in `/` makes a folder.
    pub(super) async fn put_object_(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let checks = body_checks_of!(req)?;
        let lock = asked_lock(
            req.input.object_lock_mode.as_ref(),
            req.input.object_lock_retain_until_date.as_ref(),
            req.input.object_lock_legal_hold_status.as_ref(),
        )?;
        if lock.is_some() {
            require_body_check(&req.headers, "Put Object")?;
        }
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        refuse_granting_acl(input.acl.as_ref())?;
        self.require_lock_for(owner, &input.bucket, lock.as_ref())
            .await?;
        // A key ending in `/` names a folder (what consoles make as one).
        if input.key.ends_with('/') {
            if input.content_length.unwrap_or(0) > 0 {
                return Err(s3_error!(
                    InvalidArgument,
                    "An object whose key ends in '/' is a folder here, and holds no bytes."
                ));
            }
            let prefix = Prefix::parse(&format!("{}/{}", input.bucket, input.key))
                .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
            self.files
                .make_folder(owner, &prefix, &LockTokens::default())
                .await
                .map_err(object_error)?;
            return Ok(S3Response::new(PutObjectOutput {
                e_tag: Some(ETag::Strong(EMPTY_MD5.to_owned())),
                ..PutObjectOutput::default()
            }));
        }
        let path = object_path(&input.bucket, &input.key)?;
        if let Some(ETagCondition::ETag(_)) = &input.if_none_match {
            return Err(s3_error!(
                NotImplemented,
                "If-None-Match on a write takes only '*'."
            ));
        }
        if let Some(condition) = &input.if_match {
            let found = self.find_object(owner, &input.bucket, &path).await?;
            if !matches(condition, &found.etag) {
                return Err(precondition_failed());
            }
        }
        let (body, check) = checks.check(input.body, input.content_md5.as_deref())?;
        let options = StoreOptions {
            declared: input
                .content_length
                .and_then(|length| u64::try_from(length).ok()),
            // S3's default, not a sniffed type: what S3 clients expect back.
            content_type: Some(input.content_type.map_or_else(
                || DEFAULT_CONTENT_TYPE.to_owned(),
                |content_type| content_type.to_string(),
            )),
            create_only: matches!(input.if_none_match, Some(ETagCondition::Any)),
            lock,
        };
        let meta: BTreeMap<String, String> =
            input.metadata.unwrap_or_default().into_iter().collect();
        check_metadata_size(&meta)?;
        let headers = ObjectInfo::stored_headers(
            input.cache_control.as_ref(),
            input.content_disposition.as_ref(),
            input.content_encoding.as_ref(),
            input.content_language.as_ref(),
            input.expires.as_ref(),
        );
        // What S3 keeps goes into the file's row as it is stored, once the
        // body has passed its checks, and comes back for the answer.
        let tags = tags_of_header(input.tagging.as_deref())?;
        let describe = move |received: Received| {
            let mut info = ObjectInfo::put(&received, meta, headers);
            info.tags = tags;
            (Some(info.to_json()), info)
        };
        let stored = match self
            .files
            .upload(&caller, &path, options, &LockTokens::default())
            .await
        {
            Ok(session) => session.send_inspected(body, check, describe).await,
            Err(error) => Err(Refusal::Failed(error)),
        };
        let (stored, info) = stored.map_err(|refusal| match refusal {
            Refusal::Refused(refused) => refused,
            Refusal::Failed(error) => put_error(error),
        })?;
        let expiration = self.expiration_for(owner, &input.bucket, &stored).await?;
        // S3 names a version made by a write only where versioning is on
        // (under Suspended, the null version it makes goes unnamed).
        let version_id = (stored.version_id != NULL_VERSION).then_some(stored.version_id);
        let fields = ChecksumFields::of(info.checksum.as_ref());
        Ok(S3Response::new(with_checksums!(
            PutObjectOutput {
                e_tag: Some(ETag::Strong(info.etag)),
                version_id,
                expiration,
                ..PutObjectOutput::default()
            },
            fields
        )))
    }
}

/// A failed put in S3's dialect.
fn put_error(error: ServiceError) -> S3Error {
    match error {
        ServiceError::AlreadyExists(_) => precondition_failed(),
        error => object_error(error),
    }
}
