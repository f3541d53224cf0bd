//! A form upload's policy: its signature (SigV4 over the base64 policy,
//! or SigV2's HMAC-SHA1 of it, with the key's secret), who it acts for,
//! and its conditions against
//! the form's fields, as S3 checks them.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine as _;
use hmac::{Hmac, Mac as _};
use s3s::auth::S3Auth as _;
use s3s::post_policy::{PostPolicy, PostPolicyCondition};
use sha2::Sha256;

use auth::Caller;

use super::{FormState, denied, error, missing, name_of, s3_error_response};

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac =
        HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!("any key length"));
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Who the form acts for, by its signed policy: the key's owner; and the
/// policy, decoded.
pub(super) async fn authorize(
    state: &FormState,
    fields: &BTreeMap<String, String>,
) -> Result<(Caller, PostPolicy), Response> {
    let policy_b64 = fields.get("policy").ok_or_else(|| {
        error(
            StatusCode::FORBIDDEN,
            "AccessDenied",
            "Access Denied: a form upload needs a signed policy",
        )
    })?;
    if let Some(access_key) = fields.get("awsaccesskeyid") {
        // Signature Version 2 (what boto3's generate_presigned_post signs
        // unless told s3v4): base64 of HMAC-SHA1 over the policy.
        let signature = fields
            .get("signature")
            .ok_or_else(|| missing("Signature"))?;
        let secret = state
            .keys
            .get_secret_key(access_key)
            .await
            .map_err(|e| s3_error_response(&e))?;
        let mut mac = Hmac::<sha1::Sha1>::new_from_slice(secret.expose().as_bytes())
            .unwrap_or_else(|_| unreachable!("any key length"));
        mac.update(policy_b64.as_bytes());
        let expected =
            base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        if !same(&expected, signature) {
            return Err(signature_mismatch());
        }
        return finish(state, access_key, policy_b64).await;
    }
    for field in [
        "x-amz-algorithm",
        "x-amz-credential",
        "x-amz-date",
        "x-amz-signature",
    ] {
        if !fields.contains_key(field) {
            let spelled = match field {
                "x-amz-algorithm" => "X-Amz-Algorithm",
                "x-amz-credential" => "X-Amz-Credential",
                "x-amz-date" => "X-Amz-Date",
                _ => "X-Amz-Signature",
            };
            return Err(missing(spelled));
        }
    }
    if fields["x-amz-algorithm"] != "AWS4-HMAC-SHA256" {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "Only the AWS4-HMAC-SHA256 algorithm is supported.",
        ));
    }
    let credential = &fields["x-amz-credential"];
    let parts: Vec<&str> = credential.split('/').collect();
    let [access_key, date, region, service, "aws4_request"] = parts[..] else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "The X-Amz-Credential field is malformed.",
        ));
    };
    let secret = state
        .keys
        .get_secret_key(access_key)
        .await
        .map_err(|e| s3_error_response(&e))?;
    let signing_key = [date, region, service, "aws4_request"].iter().fold(
        format!("AWS4{}", secret.expose()).into_bytes(),
        |key, part| hmac(&key, part.as_bytes()),
    );
    let expected = hex::encode(hmac(&signing_key, policy_b64.as_bytes()));
    if !same(&expected, &fields["x-amz-signature"].to_ascii_lowercase()) {
        return Err(signature_mismatch());
    }
    finish(state, access_key, policy_b64).await
}

/// Whether two signatures are the same, compared in constant time.
fn same(expected: &str, given: &str) -> bool {
    expected.len() == given.len()
        && expected
            .bytes()
            .zip(given.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

fn signature_mismatch() -> Response {
    error(
        StatusCode::FORBIDDEN,
        "SignatureDoesNotMatch",
        "The request signature we calculated does not match the signature you provided. Check \
         your key and signing method.",
    )
}

/// Who a form signed with `access_key` acts for, and its policy decoded.
async fn finish(
    state: &FormState,
    access_key: &str,
    policy_b64: &str,
) -> Result<(Caller, PostPolicy), Response> {
    let caller = state
        .keys
        .caller_of_key(access_key)
        .await
        .map_err(|e| s3_error_response(&e))?;
    let policy = policy_of(policy_b64).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "InvalidPolicyDocument",
            &format!("Invalid Policy: {e}"),
        )
    })?;
    Ok((caller, policy))
}

/// A form's policy, decoded: as S3 reads it, with `content-length-range`
/// bounds given as strings read as the numbers they spell.
fn policy_of(encoded: &str) -> Result<PostPolicy, String> {
    use base64::Engine as _;
    let json = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .map_err(|e| e.to_string())?;
    let mut document: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| e.to_string())?;
    let expiration = document
        .get("expiration")
        .and_then(serde_json::Value::as_str)
        .ok_or("the policy has no expiration")?;
    let iso = expiration.as_bytes().get(10) == Some(&b'T')
        && time::OffsetDateTime::parse(expiration, &time::format_description::well_known::Rfc3339)
            .is_ok();
    if !iso {
        return Err(format!(
            "the expiration {expiration:?} is not an ISO 8601 date and time"
        ));
    }
    if let Some(conditions) = document
        .get_mut("conditions")
        .and_then(serde_json::Value::as_array_mut)
    {
        for condition in conditions
            .iter_mut()
            .filter_map(serde_json::Value::as_array_mut)
        {
            let ranged = condition
                .first()
                .and_then(serde_json::Value::as_str)
                .is_some_and(|name| name.eq_ignore_ascii_case("content-length-range"));
            if ranged {
                for bound in condition.iter_mut().skip(1) {
                    if let Some(number) = bound.as_str().and_then(|s| s.trim().parse::<u64>().ok())
                    {
                        *bound = serde_json::Value::from(number);
                    }
                }
            }
        }
    }
    PostPolicy::from_json(&document.to_string()).map_err(|e| e.to_string())
}

/// The policy's conditions against the form's fields: the size range it
/// allows, if it names one.
pub(super) fn check_policy(
    policy: &PostPolicy,
    fields: &BTreeMap<String, String>,
) -> Result<Option<(u64, u64)>, Response> {
    let expires = time::OffsetDateTime::from(policy.expiration.clone());
    if expires <= time::OffsetDateTime::now_utc() {
        return Err(denied("Policy expired."));
    }
    let mut covered: Vec<String> = Vec::new();
    let mut range = None;
    for condition in &policy.conditions {
        match condition {
            PostPolicyCondition::Eq { field, value } => {
                let field = name_of(field);
                let given = fields.get(&field).map(String::as_str).unwrap_or("");
                if given != value {
                    return Err(denied(&format!(
                        "Policy Condition failed: [\"eq\", \"${field}\", \"{value}\"]"
                    )));
                }
                covered.push(field);
            }
            PostPolicyCondition::StartsWith { field, prefix } => {
                let field = name_of(field);
                let given = fields.get(&field).map(String::as_str).unwrap_or("");
                // `Content-Type` may list several, each must start so.
                let ok = if field == "content-type" {
                    given
                        .split(',')
                        .all(|one| one.trim().starts_with(prefix.as_str()))
                } else {
                    given.starts_with(prefix.as_str())
                };
                if !ok {
                    return Err(denied(&format!(
                        "Policy Condition failed: [\"starts-with\", \"${field}\", \"{prefix}\"]"
                    )));
                }
                covered.push(field);
            }
            PostPolicyCondition::ContentLengthRange { min, max } => range = Some((*min, *max)),
        }
    }
    for name in fields.keys() {
        let exempt = matches!(
            name.as_str(),
            "policy" | "x-amz-signature" | "awsaccesskeyid" | "signature" | "file" | "bucket"
        ) || name.starts_with("x-ignore-");
        if !exempt && !covered.contains(name) {
            return Err(denied(&format!("Extra input fields: {name}")));
        }
    }
    Ok(range)
}
