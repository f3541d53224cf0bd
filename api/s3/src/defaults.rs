//! What S3 answers for what this store keeps no configuration of: ACLs
//! (every bucket is its owner's alone, as S3's default `BucketOwnerEnforced`
//! ownership makes it: reads answer the owner's full control, a `private`
//! write is what is there already, any other is
//! `AccessControlListNotSupported`), and the bucket configurations S3 has
//! and this store has none of (encryption, website, replication, public
//! access block: S3's 404 and its code; ownership: `BucketOwnerEnforced`;
//! logging,
//! notifications, request payment, acceleration: S3's empty default). A
//! missing bucket is `NoSuchBucket` first, as S3 checks it first.

use s3s::dto::{
    BucketCannedACL, GetBucketAccelerateConfigurationInput, GetBucketAccelerateConfigurationOutput,
    GetBucketAclInput, GetBucketAclOutput, GetBucketEncryptionInput, GetBucketEncryptionOutput,
    GetBucketLoggingInput, GetBucketLoggingOutput, GetBucketNotificationConfigurationInput,
    GetBucketNotificationConfigurationOutput, GetBucketOwnershipControlsInput,
    GetBucketOwnershipControlsOutput, GetBucketReplicationInput, GetBucketReplicationOutput,
    GetBucketRequestPaymentInput, GetBucketRequestPaymentOutput, GetBucketWebsiteInput,
    GetBucketWebsiteOutput, GetObjectAclInput, GetObjectAclOutput, GetPublicAccessBlockInput,
    GetPublicAccessBlockOutput, Grant, Grantee, ObjectCannedACL, ObjectOwnership,
    OwnershipControls, OwnershipControlsRule, Payer, Permission, PutBucketAclInput,
    PutBucketAclOutput, PutObjectAclInput, PutObjectAclOutput, Type,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};

use auth::Caller;

use crate::{S3Api, caller, object_path, owner_of};

/// The one grant every bucket and object has: its owner's full control.
fn owners_grants(caller: &Caller) -> (Vec<Grant>, s3s::dto::Owner) {
    let owner = owner_of(caller);
    let grant = Grant {
        grantee: Some(Grantee {
            display_name: owner.display_name.clone(),
            email_address: None,
            id: owner.id.clone(),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    };
    (vec![grant], owner)
}

/// Whether an ACL write asks for what is there already: the owner's full
/// control alone (`private`, or a policy granting only that).
fn private_only(
    canned: Option<&str>,
    grant_headers: bool,
    policy: Option<&s3s::dto::AccessControlPolicy>,
    caller: &Caller,
) -> bool {
    if grant_headers {
        return false;
    }
    match (canned, policy) {
        (Some(canned), None) => canned == BucketCannedACL::PRIVATE,
        (None, Some(policy)) => {
            let owner = owner_of(caller).id;
            policy.grants.iter().flatten().all(|grant| {
                grant
                    .permission
                    .as_ref()
                    .is_some_and(|p| p.as_str() == Permission::FULL_CONTROL)
                    && grant.grantee.as_ref().is_some_and(|g| g.id == owner)
            })
        }
        (None, None) => true,
        (Some(_), Some(_)) => false,
    }
}

/// Refuse a write's canned ACL (`x-amz-acl`) unless it grants what every
/// object has already (`private`, `bucket-owner-full-control`).
pub(crate) fn refuse_granting_acl(acl: Option<&ObjectCannedACL>) -> S3Result<()> {
    match acl.map(ObjectCannedACL::as_str) {
        None | Some(ObjectCannedACL::PRIVATE | ObjectCannedACL::BUCKET_OWNER_FULL_CONTROL) => {
            Ok(())
        }
        Some(_) => Err(acls_not_supported()),
    }
}

fn acls_not_supported() -> S3Error {
    s3_error!(
        AccessControlListNotSupported,
        "The bucket does not allow ACLs: every bucket here is its owner's alone (S3's \
         BucketOwnerEnforced). Use a bucket policy to make objects public."
    )
}

/// S3's 404 for a configuration a bucket does not have.
fn absent(code: S3ErrorCode, message: &str) -> S3Error {
    let mut error = S3Error::with_message(code, message.to_owned());
    error.set_status_code(axum::http::StatusCode::NOT_FOUND);
    error
}

impl S3Api {
    /// `NoSuchBucket` unless the caller of `req` has `bucket`.
    async fn require_callers_bucket<T>(&self, req: &S3Request<T>, bucket: &str) -> S3Result<()> {
        self.require_bucket(caller(req)?.owner(), bucket).await
    }

    pub(crate) async fn get_bucket_acl_(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        let caller = caller(&req)?;
        self.require_bucket(caller.owner(), &req.input.bucket)
            .await?;
        let (grants, owner) = owners_grants(&caller);
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(grants),
            owner: Some(owner),
        }))
    }

    pub(crate) async fn put_bucket_acl_(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        let grant_headers = input.grant_full_control.is_some()
            || input.grant_read.is_some()
            || input.grant_read_acp.is_some()
            || input.grant_write.is_some()
            || input.grant_write_acp.is_some();
        let canned = input.acl.as_ref().map(BucketCannedACL::as_str);
        if private_only(
            canned,
            grant_headers,
            input.access_control_policy.as_ref(),
            &caller,
        ) {
            Ok(S3Response::new(PutBucketAclOutput::default()))
        } else {
            Err(acls_not_supported())
        }
    }

    pub(crate) async fn get_object_acl_(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let owner = caller.owner();
        self.require_bucket(owner, &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        self.find_object_version(owner, &input.bucket, &path, input.version_id.as_deref())
            .await?;
        let (grants, owner) = owners_grants(&caller);
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(grants),
            owner: Some(owner),
            request_charged: None,
        }))
    }

    pub(crate) async fn put_object_acl_(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        let owner = caller.owner();
        self.require_bucket(owner, &input.bucket).await?;
        let path = object_path(&input.bucket, &input.key)?;
        self.find_object_version(owner, &input.bucket, &path, input.version_id.as_deref())
            .await?;
        let grant_headers = input.grant_full_control.is_some()
            || input.grant_read.is_some()
            || input.grant_read_acp.is_some()
            || input.grant_write.is_some()
            || input.grant_write_acp.is_some();
        let canned = input.acl.as_ref().map(ObjectCannedACL::as_str);
        if private_only(
            canned,
            grant_headers,
            input.access_control_policy.as_ref(),
            &caller,
        ) {
            Ok(S3Response::new(PutObjectAclOutput::default()))
        } else {
            Err(acls_not_supported())
        }
    }

    pub(crate) async fn get_bucket_encryption_(
        &self,
        req: S3Request<GetBucketEncryptionInput>,
    ) -> S3Result<S3Response<GetBucketEncryptionOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Err(absent(
            S3ErrorCode::ServerSideEncryptionConfigurationNotFoundError,
            "The server side encryption configuration was not found",
        ))
    }

    pub(crate) async fn get_bucket_website_(
        &self,
        req: S3Request<GetBucketWebsiteInput>,
    ) -> S3Result<S3Response<GetBucketWebsiteOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Err(absent(
            S3ErrorCode::NoSuchWebsiteConfiguration,
            "The specified bucket does not have a website configuration",
        ))
    }

    pub(crate) async fn get_bucket_replication_(
        &self,
        req: S3Request<GetBucketReplicationInput>,
    ) -> S3Result<S3Response<GetBucketReplicationOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Err(absent(
            S3ErrorCode::ReplicationConfigurationNotFoundError,
            "The replication configuration was not found",
        ))
    }

    pub(crate) async fn get_public_access_block_(
        &self,
        req: S3Request<GetPublicAccessBlockInput>,
    ) -> S3Result<S3Response<GetPublicAccessBlockOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Err(absent(
            S3ErrorCode::Custom("NoSuchPublicAccessBlockConfiguration".into()),
            "The public access block configuration was not found",
        ))
    }

    pub(crate) async fn get_bucket_ownership_controls_(
        &self,
        req: S3Request<GetBucketOwnershipControlsInput>,
    ) -> S3Result<S3Response<GetBucketOwnershipControlsOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        // Every bucket is its owner's alone: S3's default since 2023.
        Ok(S3Response::new(GetBucketOwnershipControlsOutput {
            ownership_controls: Some(OwnershipControls {
                rules: vec![OwnershipControlsRule {
                    object_ownership: ObjectOwnership::from_static(
                        ObjectOwnership::BUCKET_OWNER_ENFORCED,
                    ),
                }],
            }),
        }))
    }

    pub(crate) async fn get_bucket_logging_(
        &self,
        req: S3Request<GetBucketLoggingInput>,
    ) -> S3Result<S3Response<GetBucketLoggingOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLoggingOutput::default()))
    }

    pub(crate) async fn get_bucket_notification_configuration_(
        &self,
        req: S3Request<GetBucketNotificationConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketNotificationConfigurationOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Ok(S3Response::new(
            GetBucketNotificationConfigurationOutput::default(),
        ))
    }

    pub(crate) async fn get_bucket_request_payment_(
        &self,
        req: S3Request<GetBucketRequestPaymentInput>,
    ) -> S3Result<S3Response<GetBucketRequestPaymentOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Ok(S3Response::new(GetBucketRequestPaymentOutput {
            payer: Some(Payer::from_static(Payer::BUCKET_OWNER)),
        }))
    }

    pub(crate) async fn get_bucket_accelerate_configuration_(
        &self,
        req: S3Request<GetBucketAccelerateConfigurationInput>,
    ) -> S3Result<S3Response<GetBucketAccelerateConfigurationOutput>> {
        self.require_callers_bucket(&req, &req.input.bucket).await?;
        Ok(S3Response::new(
            GetBucketAccelerateConfigurationOutput::default(),
        ))
    }
}
