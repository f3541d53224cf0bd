//! `DeleteObject` and `DeleteObjects`: idempotent, as S3's are (a key that
//! is not there is deleted already); a folder marker goes, what is in the
//! folder stays.

use s3s::dto::{
    DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::{Owner, Prefix};

use file_service::LockTokens;
use file_service::ServiceError;

use super::error::object_error;
use super::{S3Api, caller, object_path};

impl S3Api {
    pub(super) async fn delete_object_(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        self.delete_key(caller.owner(), &input.bucket, &input.key)
            .await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    /// Delete `key` of `bucket`; a key that is not there is deleted
    /// already (S3's deletes are idempotent).
    async fn delete_key(&self, owner: Owner, bucket: &str, key: &str) -> S3Result<()> {
        if key.ends_with('/') {
            // A folder marker goes only with an empty folder: the objects
            // under it are not the marker's to take.
            let prefix = Prefix::parse(&format!("{bucket}/{key}"))
                .map_err(|error| s3_error!(InvalidArgument, "{error}"))?;
            // The marker goes; what is in the folder stays.
            match self
                .files
                .remove_folder_marker(owner, &prefix, &LockTokens::default())
                .await
            {
                Ok(_) | Err(ServiceError::NotFound(_)) => {}
                Err(error) => return Err(object_error(error)),
            }
            return Ok(());
        }
        let path = object_path(bucket, key)?;
        match self
            .files
            .delete_file(owner, &path, &LockTokens::default())
            .await
        {
            Ok(()) | Err(ServiceError::NotFound(_)) => Ok(()),
            Err(error) => Err(object_error(error)),
        }
    }

    pub(super) async fn delete_objects_(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        if input.delete.objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "A DeleteObjects request names at most 1000 keys."
            ));
        }
        let quiet = input.delete.quiet.unwrap_or(false);
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for object in input.delete.objects {
            match self.delete_key(owner, &input.bucket, &object.key).await {
                Ok(()) => {
                    if !quiet {
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            ..DeletedObject::default()
                        });
                    }
                }
                Err(error) => errors.push(s3s::dto::Error {
                    code: Some(error.code().as_str().to_owned()),
                    key: Some(object.key),
                    message: error.message().map(str::to_owned),
                    version_id: None,
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: Some(errors),
            ..DeleteObjectsOutput::default()
        }))
    }
}
