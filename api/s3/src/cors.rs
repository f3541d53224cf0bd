//! CORS on the S3 port, as S3 does it: a bucket's rules
//! (`Put`/`Get`/`DeleteBucketCors`), a browser's preflight `OPTIONS`
//! answered from them (`403` when no rule allows it), and the
//! `Access-Control-*` headers on the answers to the requests they allow,
//! with `Vary: Origin`. A rule's origin `*` is answered `*`, never with
//! credentials; a named origin is echoed only when a rule names it.
//!
//! A preflight carries no credentials and S3's buckets here are per user:
//! a presigned URL's preflight names its key (the query is the URL's), and
//! the key's owner's bucket answers; otherwise the bucket whose CORS rules
//! claim the name across users does (see `volume::ConfigKind`).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use s3s::dto::{
    CORSRule, DeleteBucketCorsInput, DeleteBucketCorsOutput, GetBucketCorsInput,
    GetBucketCorsOutput, PutBucketCorsInput, PutBucketCorsOutput,
};
use s3s::{S3Request, S3Response, S3Result, s3_error};
use serde::{Deserialize, Serialize};
use volume::{ConfigKind, Owner};

use file_service::FileService;

use crate::error::object_error;
use crate::keys::KeyRing;
use crate::{S3Api, caller};

/// Most rules a bucket has, as S3.
const MOST_RULES: usize = 100;

/// The methods a rule may allow, as S3.
const METHODS: &[&str] = &["GET", "PUT", "POST", "DELETE", "HEAD"];

/// One rule, as kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    origins: Vec<String>,
    methods: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    expose: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_age: Option<i32>,
}

/// Whether `text` matches `pattern`, which may hold one `*` (any run).
fn wildcard(pattern: &str, text: &str, ignore_case: bool) -> bool {
    let (pattern, text) = if ignore_case {
        (pattern.to_ascii_lowercase(), text.to_ascii_lowercase())
    } else {
        (pattern.to_owned(), text.to_owned())
    };
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            text.len() >= head.len() + tail.len() && text.starts_with(head) && text.ends_with(tail)
        }
    }
}

impl Rule {
    /// Whether the rule allows a request from `origin` by `method` sending
    /// `headers` (lowercase).
    fn allows(&self, origin: &str, method: &str, headers: &[String]) -> bool {
        self.origins.iter().any(|o| wildcard(o, origin, false))
            && self.methods.iter().any(|m| m == method)
            && headers.iter().all(|h| {
                self.headers
                    .iter()
                    .any(|allowed| wildcard(allowed, h, true))
            })
    }

    /// The `Access-Control-*` headers of an answer to `origin` under this
    /// rule.
    fn answer(&self, origin: &str, headers: &mut HeaderMap) {
        let any = self.origins.iter().any(|o| o == "*");
        let allowed = if any { "*" } else { origin };
        if let Ok(value) = HeaderValue::from_str(allowed) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
        }
        if !any {
            headers.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
        if let Ok(value) = HeaderValue::from_str(&self.methods.join(", ")) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, value);
        }
        if !self.expose.is_empty()
            && let Ok(value) = HeaderValue::from_str(&self.expose.join(", "))
        {
            headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, value);
        }
        if let Some(age) = self.max_age {
            headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from(age));
        }
        headers.append(
            header::VARY,
            HeaderValue::from_static(
                "Origin, Access-Control-Request-Headers, Access-Control-Request-Method",
            ),
        );
    }
}

fn rule_of(rule: CORSRule) -> S3Result<Rule> {
    for method in &rule.allowed_methods {
        if !METHODS.contains(&method.as_str()) {
            return Err(s3_error!(
                InvalidRequest,
                "Found unsupported HTTP method in CORS config. Unsupported method is {method}"
            ));
        }
    }
    if rule.allowed_origins.is_empty() || rule.allowed_methods.is_empty() {
        return Err(s3_error!(
            MalformedXML,
            "The XML you provided was not well-formed or did not validate against our published schema"
        ));
    }
    let one_star = |items: &[String], what: &str| {
        if items.iter().any(|item| item.matches('*').count() > 1) {
            Err(s3_error!(
                InvalidRequest,
                "{what} can not have more than one wildcard."
            ))
        } else {
            Ok(())
        }
    };
    one_star(&rule.allowed_origins, "AllowedOrigin")?;
    let headers = rule.allowed_headers.unwrap_or_default();
    one_star(&headers, "AllowedHeader")?;
    Ok(Rule {
        id: rule.id,
        origins: rule.allowed_origins,
        methods: rule.allowed_methods,
        headers,
        expose: rule.expose_headers.unwrap_or_default(),
        max_age: rule.max_age_seconds,
    })
}

fn rule_dto(rule: &Rule) -> CORSRule {
    CORSRule {
        id: rule.id.clone(),
        allowed_origins: rule.origins.clone(),
        allowed_methods: rule.methods.clone(),
        allowed_headers: (!rule.headers.is_empty()).then(|| rule.headers.clone()),
        expose_headers: (!rule.expose.is_empty()).then(|| rule.expose.clone()),
        max_age_seconds: rule.max_age,
    }
}

impl S3Api {
    pub(crate) async fn put_bucket_cors_(
        &self,
        req: S3Request<PutBucketCorsInput>,
    ) -> S3Result<S3Response<PutBucketCorsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let input = req.input;
        self.require_bucket(owner, &input.bucket).await?;
        let rules = input.cors_configuration.cors_rules;
        if rules.is_empty() || rules.len() > MOST_RULES {
            return Err(s3_error!(
                MalformedXML,
                "A CORS configuration holds 1 to {MOST_RULES} rules"
            ));
        }
        let rules: Vec<Rule> = rules.into_iter().map(rule_of).collect::<S3Result<_>>()?;
        let body = serde_json::to_string(&rules).unwrap_or_default();
        self.files
            .set_bucket_config(owner, &input.bucket, ConfigKind::Cors, &body)
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(PutBucketCorsOutput::default()))
    }

    pub(crate) async fn get_bucket_cors_(
        &self,
        req: S3Request<GetBucketCorsInput>,
    ) -> S3Result<S3Response<GetBucketCorsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        let rules: Vec<Rule> = self
            .files
            .bucket_config(owner, bucket, ConfigKind::Cors)
            .await
            .map_err(object_error)?
            .and_then(|body| serde_json::from_str(&body).ok())
            .ok_or_else(|| {
                s3_error!(
                    NoSuchCORSConfiguration,
                    "The CORS configuration does not exist"
                )
            })?;
        Ok(S3Response::new(GetBucketCorsOutput {
            cors_rules: Some(rules.iter().map(rule_dto).collect()),
        }))
    }

    pub(crate) async fn delete_bucket_cors_(
        &self,
        req: S3Request<DeleteBucketCorsInput>,
    ) -> S3Result<S3Response<DeleteBucketCorsOutput>> {
        let caller = caller(&req)?;
        let owner = caller.owner();
        let bucket = &req.input.bucket;
        self.require_bucket(owner, bucket).await?;
        self.files
            .delete_bucket_config(owner, bucket, Some(ConfigKind::Cors))
            .await
            .map_err(object_error)?;
        Ok(S3Response::new(DeleteBucketCorsOutput::default()))
    }
}

/// What the CORS layer needs: the rules, the keys a request may name, and
/// the virtual-hosted domain.
#[derive(Debug, Clone)]
pub(crate) struct CorsState {
    pub(crate) files: FileService,
    pub(crate) keys: KeyRing,
    pub(crate) domain: Option<Arc<str>>,
}

/// The bucket a request names: the host's first label under the
/// virtual-hosted `domain`, else the path's first segment.
pub(crate) fn bucket_of(request: &Request, domain: Option<&str>) -> Option<String> {
    if let Some(domain) = domain {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .map(|host| host.rsplit_once(':').map_or(host, |(name, _)| name))
            .map(str::to_ascii_lowercase);
        if let Some(bucket) = host
            .as_deref()
            .and_then(|host| host.strip_suffix(&format!(".{}", domain.to_ascii_lowercase())))
        {
            return Some(bucket.to_owned());
        }
    }
    let path = request.uri().path().trim_start_matches('/');
    let bucket = path.split('/').next().unwrap_or_default();
    (!bucket.is_empty()).then(|| bucket.to_owned())
}

/// Whether a request's URL names an object (a key after the bucket).
fn names_an_object(request: &Request, domain: Option<&str>) -> bool {
    let path = request.uri().path().trim_start_matches('/');
    let virtual_hosted = domain.is_some()
        && bucket_of(request, domain)
            .is_some_and(|bucket| path.split('/').next() != Some(bucket.as_str()));
    if virtual_hosted {
        !path.is_empty()
    } else {
        path.split_once('/').is_some_and(|(_, key)| !key.is_empty())
    }
}

/// The access key a request names (in its `Authorization` or its
/// presigned query), unchecked: whose rules answer it.
fn access_key_of(request: &Request) -> Option<String> {
    let from_header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|auth| {
            auth.split_once("Credential=")
                .map(|(_, rest)| rest.split('/').next().unwrap_or_default().to_owned())
                .or_else(|| {
                    auth.strip_prefix("AWS ")
                        .and_then(|rest| rest.split_once(':'))
                        .map(|(key, _)| key.to_owned())
                })
        });
    from_header.or_else(|| {
        let query = request.uri().query()?;
        query.split('&').find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .ok()?;
            match name {
                "X-Amz-Credential" => value.split('/').next().map(str::to_owned),
                "AWSAccessKeyId" => Some(value.into_owned()),
                _ => None,
            }
        })
    })
}

/// What answers a cross-origin request to a bucket.
enum Found {
    Rules(Vec<Rule>),
    NotEnabled,
    NoBucket,
}

impl CorsState {
    /// The CORS rules that answer a request naming `key` (an access key,
    /// if it names one) and `bucket`: its key's owner's bucket's, else the
    /// ones that claim the name.
    async fn rules_for(&self, key: Option<String>, bucket: &str) -> Found {
        let owner: Option<Owner> = match key {
            Some(key) => self.keys.owner_of_key(&key).await,
            None => None,
        };
        let body = match owner {
            Some(owner) => {
                let Ok(prefix) = volume::Prefix::parse(&format!("{bucket}/")) else {
                    return Found::NoBucket;
                };
                if !self
                    .files
                    .folder_exists(owner, &prefix)
                    .await
                    .unwrap_or(false)
                {
                    return Found::NoBucket;
                }
                self.files
                    .bucket_config(owner, bucket, ConfigKind::Cors)
                    .await
                    .ok()
                    .flatten()
            }
            None => match self
                .files
                .claimed_bucket_config(bucket, ConfigKind::Cors)
                .await
            {
                Ok(Some((_, body))) => Some(body),
                _ if self
                    .files
                    .bucket_named_anywhere(bucket)
                    .await
                    .unwrap_or(true) =>
                {
                    None
                }
                _ => return Found::NoBucket,
            },
        };
        match body.and_then(|body| serde_json::from_str(&body).ok()) {
            Some(rules) => Found::Rules(rules),
            None => Found::NotEnabled,
        }
    }
}

/// A preflight's refusal, as S3 writes it (with the method asked and
/// what the URL names, when a preflight was refused).
fn refused(status: StatusCode, code: &str, message: &str, asked: Option<(&str, bool)>) -> Response {
    let extra = asked.map_or_else(String::new, |(method, object)| {
        let method = method.replace('&', "&amp;").replace('<', "&lt;");
        let kind = if object { "OBJECT" } else { "BUCKET" };
        format!("<Method>{method}</Method><ResourceType>{kind}</ResourceType>")
    });
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{message}</Message>{extra}</Error>"
    );
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/xml"),
        )],
        body,
    )
        .into_response()
}

/// The CORS layer: preflights answered here, and the headers of the
/// answers to cross-origin requests added.
pub(crate) async fn cors(State(state): State<CorsState>, request: Request, next: Next) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let preflight_asked = request.method() == Method::OPTIONS;
    // A request without `Origin` is not a browser's cross-origin one.
    if origin.is_none() && !preflight_asked {
        return next.run(request).await;
    }
    let bucket = bucket_of(&request, state.domain.as_deref());
    let key = access_key_of(&request);
    if preflight_asked {
        let object = names_an_object(&request, state.domain.as_deref());
        let (parts, _) = request.into_parts();
        return preflight(&state, &parts.headers, key, origin, (bucket, object)).await;
    }
    let (Some(origin), Some(bucket)) = (origin, bucket) else {
        return next.run(request).await;
    };
    let method = request.method().as_str().to_owned();
    let rules = match state.rules_for(key, &bucket).await {
        Found::Rules(rules) => rules,
        Found::NotEnabled | Found::NoBucket => Vec::new(),
    };
    let mut response = next.run(request).await;
    if let Some(rule) = rules.iter().find(|rule| rule.allows(&origin, &method, &[])) {
        rule.answer(&origin, response.headers_mut());
    }
    response
}

async fn preflight(
    state: &CorsState,
    headers: &HeaderMap,
    key: Option<String>,
    origin: Option<String>,
    (bucket, object): (Option<String>, bool),
) -> Response {
    let Some(origin) = origin else {
        return refused(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "Insufficient information. Origin request header needed.",
            None,
        );
    };
    let asked: Vec<String> = headers
        .get_all(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    let asked_method = headers
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("OPTIONS")
        .to_owned();
    let found = match bucket {
        Some(bucket) => state.rules_for(key, &bucket).await,
        None => Found::NoBucket,
    };
    let rules = match found {
        Found::Rules(rules) => rules,
        Found::NoBucket => {
            return refused(
                StatusCode::FORBIDDEN,
                "AccessForbidden",
                "CORSResponse: Bucket not found",
                Some((asked_method.as_str(), false)),
            );
        }
        Found::NotEnabled => {
            return refused(
                StatusCode::FORBIDDEN,
                "AccessForbidden",
                "CORSResponse: CORS is not enabled for this bucket.",
                Some((asked_method.as_str(), false)),
            );
        }
    };
    let Some(method) = headers
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
    else {
        return refused(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "Invalid Access-Control-Request-Method: null",
            None,
        );
    };
    let Some(rule) = rules
        .iter()
        .find(|rule| rule.allows(&origin, &method, &asked))
    else {
        return refused(
            StatusCode::FORBIDDEN,
            "AccessForbidden",
            "CORSResponse: This CORS request is not allowed. This is usually because the \
             evalution of Origin, request method / Access-Control-Request-Method or \
             Access-Control-Request-Headers are not whitelisted by the resource's CORS spec.",
            Some((&method, object)),
        );
    };
    let mut response = StatusCode::OK.into_response();
    let headers = response.headers_mut();
    rule.answer(&origin, headers);
    if !asked.is_empty()
        && let Ok(value) = HeaderValue::from_str(&asked.join(", "))
    {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(origins: &[&str], methods: &[&str], headers: &[&str]) -> Rule {
        Rule {
            id: None,
            origins: origins.iter().map(|s| (*s).to_owned()).collect(),
            methods: methods.iter().map(|s| (*s).to_owned()).collect(),
            headers: headers.iter().map(|s| (*s).to_owned()).collect(),
            expose: Vec::new(),
            max_age: None,
        }
    }

    #[test]
    fn origins_methods_and_headers_match_as_s3_matches_them() {
        let rule = rule(
            &["https://*.example.com"],
            &["GET", "PUT"],
            &["x-amz-*", "Content-Type"],
        );
        assert!(rule.allows("https://app.example.com", "PUT", &["content-type".into()]));
        assert!(rule.allows("https://app.example.com", "GET", &["x-amz-date".into()]));
        assert!(!rule.allows("https://example.org", "GET", &[]));
        assert!(!rule.allows("https://app.example.com", "DELETE", &[]));
        assert!(!rule.allows("https://app.example.com", "GET", &["authorization".into()]));
    }

    #[test]
    fn any_origin_is_answered_star_without_credentials() {
        let mut headers = HeaderMap::new();
        rule(&["*"], &["GET"], &[]).answer("https://evil.example", &mut headers);
        assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert!(!headers.contains_key(header::ACCESS_CONTROL_ALLOW_CREDENTIALS));
        let mut headers = HeaderMap::new();
        rule(&["https://app.example"], &["GET"], &[]).answer("https://app.example", &mut headers);
        assert_eq!(
            headers[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://app.example"
        );
        assert!(
            headers[header::VARY]
                .to_str()
                .unwrap_or("")
                .starts_with("Origin")
        );
    }
}
