//! Entry points for fuzzers: each takes arbitrary bytes, runs one parser of
//! client input, and panics only when an invariant of its answer breaks.
//! `fuzz/` drives them with libFuzzer (`scripts/fuzz.sh`); the
//! `fuzz_parsers` test drives them with proptest on every `cargo test`.

use axum::http::{HeaderMap, HeaderValue, header};
use volume::{FilePath, Prefix};

use crate::auth::Credentials;
use crate::auth::secrets::{ShareSigner, ShareToken};
use crate::recycler::{Method, Mode, Policy, PolicyConfig, Settings, SettingsChange};
use crate::runtime::ByteRange;
use api_common::headers::{parse_if_none_match, parse_range};

/// A path from a URL: what is accepted is normalised (no empty, `.` or
/// `..` segment, no leading slash) and parses back to itself.
pub fn file_path(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    if let Ok(path) = FilePath::from_url(text) {
        let path = path.as_str();
        assert!(!path.is_empty() && !path.starts_with('/'), "{path:?}");
        assert!(
            path.split('/')
                .all(|segment| !matches!(segment, "" | "." | "..")),
            "{path:?}"
        );
        assert!(!path.contains('\0'), "{path:?}");
        assert_eq!(
            FilePath::parse(path).ok().as_ref().map(FilePath::as_str),
            Some(path)
        );
    }
    if let Ok(prefix) = Prefix::from_url(text) {
        let prefix = prefix.as_str();
        assert!(prefix.is_empty() || prefix.ends_with('/'), "{prefix:?}");
        assert!(
            !prefix.contains("//") && !prefix.starts_with('/'),
            "{prefix:?}"
        );
    }
}

fn header_map(name: header::HeaderName, input: &[u8]) -> Option<HeaderMap> {
    let value = HeaderValue::from_bytes(input).ok()?;
    let mut headers = HeaderMap::new();
    headers.insert(name, value);
    Some(headers)
}

/// `Range`: a single range whose last byte is never before its first.
pub fn byte_range(input: &[u8]) {
    let Some(headers) = header_map(header::RANGE, input) else {
        return;
    };
    if let Some(ByteRange::FirstLast((first, Some(last)))) = parse_range(&headers) {
        assert!(last >= first, "{first}-{last}");
    }
}

/// `If-None-Match`: tags are non-empty and unquoted.
pub fn if_none_match(input: &[u8]) {
    let Some(headers) = header_map(header::IF_NONE_MATCH, input) else {
        return;
    };
    for tag in parse_if_none_match(&headers) {
        assert!(!tag.is_empty(), "{input:?}");
        assert!(!tag.starts_with('"') && !tag.ends_with('"'), "{tag:?}");
    }
}

/// `Authorization`: Basic names are non-empty and carry no `:`; tokens
/// are bounded.
pub fn authorization(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    match Credentials::parse_authorization(text) {
        Some(Credentials::Password { name, .. } | Credentials::NamedToken { name, .. }) => {
            assert!(!name.is_empty() && !name.contains(':'), "{name:?}");
        }
        Some(Credentials::Token(token)) => assert!(!token.is_empty() && token.len() <= 512),
        _ => {}
    }
}

/// `PUT /admin/estimator`: whatever the policy accepts leaves it with
/// valid settings.
pub fn admin_json(input: &[u8]) {
    let Ok(change) = serde_json::from_slice::<SettingsChange>(input) else {
        return;
    };
    let config = PolicyConfig {
        warmup: estimator::Warmup::None,
        min_requests: 32,
        footprint_window: 1000,
        calibration_instances: 2,
        calibration_samples: 6,
        calibration_requests: 20,
        rolling_window_ms: 600_000,
        floor_margin: 256 << 10,
    };
    let settings = Settings {
        mode: Mode::Rolling,
        method: Method::RestartBudget,
        alpha: 0.05,
        restart_budget: 0.01,
        fixed_threshold: None,
    };
    let Ok(mut policy) = Policy::new(config, settings, 0) else {
        unreachable!("the default settings are valid");
    };
    if policy.change(&change, 1, 0).is_ok() {
        assert_eq!(policy.settings().validate(), Ok(()), "{change:?}");
    }
}

/// Share tokens: what verifies signs back to a token that verifies the
/// same; a made-up one (almost surely) does not verify.
pub fn share_token(input: &[u8]) {
    let Ok(text) = std::str::from_utf8(input) else {
        return;
    };
    let signer = ShareSigner::new(b"fuzzing key");
    if let Some(token) = signer.verify(text) {
        assert_eq!(signer.verify(&signer.sign(&token)), Some(token));
    }
    let id: String = text
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect();
    if !id.is_empty() {
        let token = ShareToken {
            id,
            expires_ms: None,
        };
        assert_eq!(signer.verify(&signer.sign(&token)), Some(token));
    }
}
