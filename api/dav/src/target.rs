//! A WebDAV URL → the resource it names (a name in the caller's tree, or
//! the root), the key its properties and locks are stored by, and back to
//! an href.

use axum::http::{HeaderMap, Uri, header};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use volume::webdav::Node;
use volume::{FilePath, Prefix};

use api_common::ApiError;
use file_service::parent_key_of;

/// What stays raw in an href's path segments (RFC 3986 unreserved).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A request's resource: the root, or a name (the trailing slash a client
/// may add to a collection does not change which resource it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) name: Option<FilePath>,
}

impl Target {
    pub(super) fn from_uri(uri: &Uri) -> Result<Self, ApiError> {
        Self::from_path(uri.path())
            .ok_or_else(|| ApiError::BadRequest(format!("{} is not under /dav/", uri.path())))?
    }

    /// The resource of a URL path, if it lies under `/dav`.
    pub(super) fn from_path(path: &str) -> Option<Result<Self, ApiError>> {
        let rest = path.strip_prefix("/dav")?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        Some(if rest.is_empty() {
            Ok(Self { name: None })
        } else {
            FilePath::from_url(rest)
                .map(|name| Self { name: Some(name) })
                .map_err(ApiError::from)
        })
    }

    pub(super) fn shown(&self) -> String {
        self.name
            .as_ref()
            .map_or_else(|| "/".to_owned(), ToString::to_string)
    }

    /// The folder this resource is in (`None` for the root itself).
    pub(super) fn parent(&self) -> Option<Prefix> {
        let name = self.name.as_ref()?;
        // A valid name's parent is valid: parsing cannot fail.
        Some(Prefix::parse(parent_key_of(name.as_str())).unwrap_or_else(|_| Prefix::root()))
    }
}

/// The key properties and locks are stored by: a file's path, a folder's
/// prefix (empty for the root).
pub(super) fn key_of(node: &Node, target: &Target) -> String {
    match node {
        Node::File(meta) => meta.path.clone(),
        Node::Folder(folder) => folder.prefix.as_str().to_owned(),
        // Not there yet: named as the file it would be.
        Node::Missing => target
            .name
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    }
}

/// The href of a resource key.
pub(super) fn href(key: &str) -> String {
    let mut href = String::from("/dav/");
    let (path, folder) = match key.strip_suffix('/') {
        Some(path) => (path, true),
        None => (key, false),
    };
    for (at, segment) in path.split('/').filter(|s| !s.is_empty()).enumerate() {
        if at > 0 {
            href.push('/');
        }
        href.extend(utf8_percent_encode(segment, SEGMENT));
    }
    if folder {
        href.push('/');
    }
    href
}

/// The resource a `Destination` header names: ours, under `/dav/`. A URL
/// naming another host than the request's `Host` (or the
/// `X-Forwarded-Host` a proxy set) is another server's: `502`.
pub(super) fn destination(url: &str, headers: &HeaderMap) -> Result<Target, ApiError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| ApiError::BadRequest("the Destination is not a URL".into()))?;
    if let Some(authority) = uri.authority() {
        let named = without_default_port(authority.as_str(), uri.scheme_str());
        let ours = [header::HOST.as_str(), "x-forwarded-host"]
            .into_iter()
            .filter_map(|name| headers.get(name)?.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|host| {
                without_default_port(host.trim(), uri.scheme_str()).eq_ignore_ascii_case(named)
            });
        if !ours {
            return Err(ApiError::BadGateway(
                "the Destination is on another server".into(),
            ));
        }
    }
    Target::from_path(uri.path()).unwrap_or_else(|| {
        Err(ApiError::BadGateway(
            "the Destination is not under /dav/".into(),
        ))
    })
}

/// `host[:port]` without the scheme's default port.
fn without_default_port<'a>(authority: &'a str, scheme: Option<&str>) -> &'a str {
    let default = match scheme {
        Some("https") => ":443",
        _ => ":80",
    };
    authority.strip_suffix(default).unwrap_or(authority)
}

/// The key of the folder a resource is in.
pub(super) fn parent_key(target: &Target) -> String {
    target
        .name
        .as_ref()
        .map(|name| parent_key_of(name.as_str()).to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_hrefs() {
        let target = |path: &str| {
            Target::from_path(path).map(|t| t.map(|t| t.name.map(|n| n.to_string())).ok())
        };
        assert_eq!(target("/dav"), Some(Some(None)));
        assert_eq!(target("/dav/"), Some(Some(None)));
        assert_eq!(target("/dav/a/b/"), Some(Some(Some("a/b".into()))));
        assert_eq!(
            target("/dav/res-%e2%82%ac"),
            Some(Some(Some("res-€".into())))
        );
        assert_eq!(target("/dav/a/../b"), Some(None));
        assert_eq!(target("/davx"), None);
        assert_eq!(target("/files/a"), None);
        assert_eq!(href(""), "/dav/");
        assert_eq!(href("a b/c€/"), "/dav/a%20b/c%E2%82%AC/");
        assert_eq!(href("x&y"), "/dav/x%26y");
        assert_eq!(parent_key_of("a/b/c"), "a/b/");
        assert_eq!(parent_key_of("a/b/"), "a/");
        assert_eq!(parent_key_of("a"), "");
    }
}
