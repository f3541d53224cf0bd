//! Bucket policies, the subset people use them for: anonymous read of a
//! bucket or of key prefixes (`s3:GetObject`), and optionally its listing
//! (`s3:ListBucket`, `s3:GetBucketLocation`); `Put`/`Get`/
//! `DeleteBucketPolicy` and `GetBucketPolicyStatus`. Any other policy is
//! refused, saying what is supported: `MalformedPolicy` for what S3 would
//! refuse too, `501 NotImplemented` for what S3 has and this store does
//! not (a `Deny`, a `Condition`, a named principal, a write). A policy
//! claims its bucket's name across users (an anonymous request names a
//! bucket, not its owner). An anonymous request it allows acts for the
//! bucket's owner, read-only (`auth::Caller::Public`, see `keys`).

use s3s::dto::{
    DeleteBucketPolicyInput, DeleteBucketPolicyOutput, GetBucketPolicyInput, GetBucketPolicyOutput,
    GetBucketPolicyStatusInput, GetBucketPolicyStatusOutput, PolicyStatus, PutBucketPolicyInput,
    PutBucketPolicyOutput,
};
use s3s::{S3Error, S3ErrorCode, S3Request, S3Response, S3Result, s3_error};
use serde_json::Value;
use volume::{ConfigKind, Owner};

use file_service::FileService;

use crate::error::object_error;
use crate::{S3Api, caller};

/// What this store's policies can say.
const SUPPORTED: &str = "this store's bucket policies grant anonymous read only: statements with \
     \"Effect\": \"Allow\", \"Principal\": \"*\", and \"Action\" s3:GetObject on \
     \"arn:aws:s3:::BUCKET/*\" (or a key prefix, \"arn:aws:s3:::BUCKET/PREFIX*\") or \
     s3:ListBucket and s3:GetBucketLocation on \"arn:aws:s3:::BUCKET\"";

/// What a bucket's policy lets anyone do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PublicRead {
    /// Key prefixes anyone may read ("" for every key).
    objects: Vec<String>,
    /// Anyone may list the bucket.
    list: bool,
    /// Anyone may ask where the bucket is.
    location: bool,
}

impl PublicRead {
    /// Whether the anonymous operation `op` on `key` (if an object's) is
    /// allowed.
    pub(crate) fn allows(&self, op: &str, key: Option<&str>) -> bool {
        match (op, key) {
            ("GetObject" | "HeadObject", Some(key)) => {
                self.objects.iter().any(|prefix| key.starts_with(prefix))
            }
            ("ListObjects" | "ListObjectsV2" | "HeadBucket", None) => self.list,
            ("GetBucketLocation", None) => self.location,
            _ => false,
        }
    }
}

fn malformed(message: &str) -> S3Error {
    S3Error::with_message(S3ErrorCode::MalformedPolicy, message.to_owned())
}

fn unsupported(what: &str) -> S3Error {
    S3Error::with_message(
        S3ErrorCode::NotImplemented,
        format!("{what} is not supported: {SUPPORTED}."),
    )
}

/// A string or a list of strings (the policy grammar allows both).
fn strings(value: &Value, what: &str) -> S3Result<Vec<String>> {
    match value {
        Value::String(one) => Ok(vec![one.clone()]),
        Value::Array(many) => many
            .iter()
            .map(|item| {
                item.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| malformed(&format!("{what} must be strings")))
            })
            .collect(),
        _ => Err(malformed(&format!("{what} must be a string or a list"))),
    }
}

/// `policy`, a document for bucket `bucket`, as what it allows; refused
/// with S3's codes and a message naming what is supported.
pub(crate) fn parse(bucket: &str, policy: &str) -> S3Result<PublicRead> {
    let document: Value = serde_json::from_str(policy)
        .map_err(|_| malformed("Policies must be valid JSON and the first byte must be '{'"))?;
    let Value::Object(document) = document else {
        return Err(malformed(
            "Policies must be valid JSON and the first byte must be '{'",
        ));
    };
    if let Some(version) = document.get("Version")
        && !matches!(version.as_str(), Some("2012-10-17" | "2008-10-17"))
    {
        return Err(malformed("The policy must contain a valid version string"));
    }
    let statements = match document.get("Statement") {
        Some(Value::Array(statements)) if !statements.is_empty() => statements.clone(),
        Some(statement @ Value::Object(_)) => vec![statement.clone()],
        _ => return Err(malformed("Missing required field Statement")),
    };
    let mut public = PublicRead::default();
    let bucket_arn = format!("arn:aws:s3:::{bucket}");
    for statement in &statements {
        let Value::Object(statement) = statement else {
            return Err(malformed("A statement must be an object"));
        };
        for field in statement.keys() {
            match field.as_str() {
                "Sid" | "Effect" | "Principal" | "Action" | "Resource" => {}
                "Condition" | "NotPrincipal" | "NotAction" | "NotResource" => {
                    return Err(unsupported(&format!("\"{field}\"")));
                }
                other => return Err(malformed(&format!("Unknown field {other}"))),
            }
        }
        match statement.get("Effect").and_then(Value::as_str) {
            Some("Allow") => {}
            Some("Deny") => return Err(unsupported("\"Effect\": \"Deny\"")),
            Some(other) => return Err(malformed(&format!("Invalid effect: {other}"))),
            None => return Err(malformed("Missing required field Effect")),
        }
        let anyone = match statement.get("Principal") {
            Some(Value::String(star)) => star == "*",
            Some(Value::Object(principal)) => {
                principal.len() == 1
                    && principal
                        .get("AWS")
                        .is_some_and(|aws| strings(aws, "Principal").is_ok_and(|p| p == ["*"]))
            }
            _ => return Err(malformed("Missing required field Principal")),
        };
        if !anyone {
            return Err(unsupported("A principal other than \"*\""));
        }
        let actions = strings(
            statement
                .get("Action")
                .ok_or_else(|| malformed("Missing required field Action"))?,
            "Action",
        )?;
        let resources = strings(
            statement
                .get("Resource")
                .ok_or_else(|| malformed("Missing required field Resource"))?,
            "Resource",
        )?;
        let mut prefixes = Vec::new();
        let mut on_bucket = false;
        for resource in &resources {
            if resource == &bucket_arn {
                on_bucket = true;
            } else if let Some(object) = resource.strip_prefix(&format!("{bucket_arn}/")) {
                let prefix = object.strip_suffix('*').unwrap_or(object);
                if prefix.contains(['*', '?']) {
                    return Err(unsupported("A wildcard other than a trailing '*'"));
                }
                prefixes.push(prefix.to_owned());
            } else {
                return Err(malformed("Policy has invalid resource"));
            }
        }
        for action in &actions {
            match action.as_str() {
                "s3:GetObject" if !prefixes.is_empty() => {
                    public.objects.extend(prefixes.iter().cloned());
                }
                "s3:ListBucket" if on_bucket => public.list = true,
                "s3:GetBucketLocation" if on_bucket => public.location = true,
                "s3:GetObject" | "s3:ListBucket" | "s3:GetBucketLocation" => {
                    return Err(malformed(
                        "Action does not apply to any resource(s) in statement",
                    ));
                }
                action if action.starts_with("s3:") => {
                    return Err(unsupported(&format!("The action {action}")));
                }
                _ => return Err(malformed("Policy has invalid action")),
            }
        }
    }
    Ok(public)
}

/// The owner whose bucket `bucket` has a policy that lets anyone do `op`
/// (on `key`, an object's), if one has, and whether it lets anyone list
/// the bucket.
pub(crate) async fn public_reader(
    files: &FileService,
    bucket: &str,
    key: Option<&str>,
    op: &str,
) -> S3Result<Option<(Owner, bool)>> {
    let Some((owner, policy)) = files
        .claimed_bucket_config(bucket, ConfigKind::Policy)
        .await
        .map_err(object_error)?
    else {
        return Ok(None);
    };
    Ok(parse(bucket, &policy)
        .ok()
        .filter(|public| public.allows(op, key))
        .map(|public| (owner, public.list)))
}

/// What an anonymous read of a key that is not there answers: `403`, as
/// S3 answers whoever may not list the bucket (the key's absence is not
/// theirs to learn), else `error` as it is.
pub(crate) fn hide_absence(caller: &auth::Caller, error: S3Error) -> S3Error {
    let hidden = matches!(caller, auth::Caller::Public { lists: false, .. });
    if hidden && *error.code() == S3ErrorCode::NoSuchKey {
        s3_error!(AccessDenied, "Access Denied")
    } else {
        error
    }
}

fn no_policy() -> S3Error {
    s3_error!(NoSuchBucketPolicy, "The bucket policy does not exist")
}

impl S3Api {
    pub(crate) async fn put_bucket_policy_(
        &self,
        req: S3Request<PutBucketPolicyInput>,
    ) -> S3Result<S3Response<PutBucketPolicyOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        parse(&input.bucket, &input.policy)?;
        self.files
            .set_bucket_config(owner, &input.bucket, ConfigKind::Policy, &input.policy)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutBucketPolicyOutput::default()))
    }

    pub(crate) async fn get_bucket_policy_(
        &self,
        req: S3Request<GetBucketPolicyInput>,
    ) -> S3Result<S3Response<GetBucketPolicyOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let policy = self
            .files
            .bucket_config(owner, bucket, ConfigKind::Policy)
            .await
            .map_err(object_error)?
            .ok_or_else(no_policy)?;
        Ok(S3Response::new(GetBucketPolicyOutput {
            policy: Some(policy),
        }))
    }

    pub(crate) async fn delete_bucket_policy_(
        &self,
        req: S3Request<DeleteBucketPolicyInput>,
    ) -> S3Result<S3Response<DeleteBucketPolicyOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        self.files
            .delete_bucket_config(owner, bucket, Some(ConfigKind::Policy))
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(DeleteBucketPolicyOutput::default()))
    }

    pub(crate) async fn get_bucket_policy_status_(
        &self,
        req: S3Request<GetBucketPolicyStatusInput>,
    ) -> S3Result<S3Response<GetBucketPolicyStatusOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        self.files
            .bucket_config(owner, bucket, ConfigKind::Policy)
            .await
            .map_err(object_error)?
            .ok_or_else(no_policy)?;
        // Every policy this store keeps makes something public.
        Ok(S3Response::new(GetBucketPolicyStatusOutput {
            policy_status: Some(PolicyStatus {
                is_public: Some(true),
            }),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_read_of_a_prefix_and_the_listing() {
        let mc_download = r#"{"Version":"2012-10-17","Statement":[
            {"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetBucketLocation","s3:ListBucket"],"Resource":["arn:aws:s3:::b"]},
            {"Effect":"Allow","Principal":{"AWS":["*"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/public/*"]}]}"#;
        let public = parse("b", mc_download).unwrap_or_default();
        assert!(public.allows("GetObject", Some("public/a.jpg")));
        assert!(!public.allows("GetObject", Some("private/a.jpg")));
        assert!(public.allows("ListObjectsV2", None));
        assert!(!public.allows("PutObject", Some("public/a.jpg")));
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_with_s3s_codes() {
        let code = |policy: &str| {
            parse("b", policy)
                .err()
                .map(|e| e.code().as_str().to_owned())
        };
        let statement = |body: &str| format!(r#"{{"Version":"2012-10-17","Statement":[{body}]}}"#);
        assert_eq!(code("not json").as_deref(), Some("MalformedPolicy"));
        assert_eq!(
            code(&statement(r#"{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}"#)).as_deref(),
            Some("NotImplemented")
        );
        assert_eq!(
            code(&statement(r#"{"Effect":"Allow","Principal":"*","Action":"s3:PutObject","Resource":"arn:aws:s3:::b/*"}"#)).as_deref(),
            Some("NotImplemented")
        );
        assert_eq!(
            code(&statement(r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::other/*"}"#)).as_deref(),
            Some("MalformedPolicy")
        );
        assert_eq!(
            code(&statement(r#"{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*","Condition":{}}"#)).as_deref(),
            Some("NotImplemented")
        );
    }
}
