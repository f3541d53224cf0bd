//! `DeleteObject` and `DeleteObjects`: idempotent, as S3's are (a key that
//! is not there is deleted already); where versions are kept a delete
//! leaves a delete marker, and one naming a version removes just it; a
//! folder marker goes, what is in the folder stays.

use s3s::dto::{
    DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput, DeleteObjectsOutput, DeletedObject,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use volume::{NULL_VERSION, Owner, Prefix, Version};

use file_service::LockTokens;
use file_service::ServiceError;

use super::error::object_error;
use super::versioning::checked_version;
use super::{S3Api, caller, object_path};

/// What deleting one key (or one version of it) did, as S3 reports it.
#[derive(Default)]
struct Outcome {
    /// The version removed, or the delete marker made.
    version_id: Option<String>,
    /// Whether a delete marker was made, or the version removed was one.
    delete_marker: bool,
}

impl S3Api {
    pub(super) async fn delete_object_(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let caller = caller(&req)?;
        let input = req.input;
        self.require_bucket(caller.owner(), &input.bucket).await?;
        let bypass = self
            .governance_bypass(
                caller.owner(),
                &input.bucket,
                input.bypass_governance_retention,
            )
            .await?;
        let outcome = self
            .delete_key(
                caller.owner(),
                (&input.bucket, &input.key),
                input.version_id.as_deref(),
                bypass,
            )
            .await?;
        Ok(S3Response::new(DeleteObjectOutput {
            delete_marker: outcome.delete_marker.then_some(true),
            version_id: outcome.version_id,
            ..DeleteObjectOutput::default()
        }))
    }

    /// Delete `key` of `bucket` (its `version`, if one is named): a key
    /// that is not there is deleted already (S3's deletes are idempotent),
    /// and so is a version that is not. A version object lock holds is
    /// refused (`AccessDenied`) unless `bypass` lifts its governance.
    async fn delete_key(
        &self,
        owner: Owner,
        (bucket, key): (&str, &str),
        version: Option<&str>,
        bypass: bool,
    ) -> S3Result<Outcome> {
        let version = version.map(checked_version).transpose()?;
        if key.ends_with('/') && version.is_none_or(|version| version == NULL_VERSION) {
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
            return Ok(Outcome {
                version_id: version.map(str::to_owned),
                delete_marker: false,
            });
        }
        let path = object_path(bucket, key)?;
        let tokens = LockTokens::default();
        if let Some(version) = version {
            let removed = self
                .files
                .delete_version(owner, &path, version, bypass, &tokens)
                .await
                .map_err(object_error)?;
            return Ok(Outcome {
                version_id: Some(version.to_owned()),
                delete_marker: matches!(removed, Some(Version::DeleteMarker { .. })),
            });
        }
        let deleted = self
            .files
            .delete_latest(owner, &path, &tokens)
            .await
            .map_err(object_error)?;
        Ok(Outcome {
            delete_marker: deleted.marker.is_some(),
            version_id: deleted.marker,
        })
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
        let bypass = self
            .governance_bypass(owner, &input.bucket, input.bypass_governance_retention)
            .await?;
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for object in input.delete.objects {
            let asked = object.version_id.clone();
            // A version id this store never made names no version (S3
            // reports it so here, where a single delete says 400).
            let outcome = match asked.as_deref().map(checked_version) {
                Some(Err(_)) => Err(s3_error!(
                    NoSuchVersion,
                    "The specified version does not exist."
                )),
                _ => {
                    self.delete_key(
                        owner,
                        (&input.bucket, &object.key),
                        asked.as_deref(),
                        bypass,
                    )
                    .await
                }
            };
            match outcome {
                Ok(outcome) => {
                    if !quiet {
                        // A marker made: its id; a version removed: that id
                        // (and, a marker's, the marker's too).
                        let (version_id, marker_id) = match (&asked, outcome.delete_marker) {
                            (Some(asked), true) => (Some(asked.clone()), Some(asked.clone())),
                            (Some(asked), false) => (Some(asked.clone()), None),
                            (None, true) => (None, outcome.version_id),
                            (None, false) => (None, None),
                        };
                        deleted.push(DeletedObject {
                            key: Some(object.key),
                            version_id,
                            delete_marker: outcome.delete_marker.then_some(true),
                            delete_marker_version_id: marker_id,
                        });
                    }
                }
                Err(error) => errors.push(s3s::dto::Error {
                    code: Some(error.code().as_str().to_owned()),
                    key: Some(object.key),
                    message: error.message().map(str::to_owned),
                    version_id: asked,
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
