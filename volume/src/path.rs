//! File paths and listing prefixes: the one place where what a client sends is
//! decoded, normalised and validated. Everything past this module holds a
//! [`FilePath`] or a [`Prefix`] and can trust it.

use std::fmt;

use percent_encoding::percent_decode_str;

/// Longest accepted path, in bytes of UTF-8.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted single name (one segment of a path), in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 255;

/// Why a path was refused. The message is safe to show to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the path is empty")]
    Empty,
    #[error("the path is {0} bytes long; the limit is {MAX_PATH_BYTES}")]
    TooLong(usize),
    #[error("a name in the path is {0} bytes long; the limit is {MAX_NAME_BYTES}")]
    NameTooLong(usize),
    #[error("the path has an empty segment (`//`, or a leading or trailing `/`)")]
    EmptySegment,
    #[error("`.` and `..` are not allowed as path segments")]
    DotSegment,
    #[error("the path contains a backslash")]
    Backslash,
    #[error("the path contains a NUL or control character")]
    ControlCharacter,
    #[error("the path contains a percent-encoded `.`, `/` or `\\`")]
    EncodedTraversal,
    #[error("the path is not valid UTF-8 once percent-decoded")]
    NotUtf8,
    #[error("the path has a `%` not followed by two hex digits")]
    BadPercentEncoding,
}

/// A validated file path: non-empty `/`-separated names, no leading or
/// trailing slash, none of the refused forms of [`PathError`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilePath(String);

impl FilePath {
    /// Validate an already percent-decoded path.
    pub fn parse(path: &str) -> Result<Self, PathError> {
        if path.is_empty() {
            return Err(PathError::Empty);
        }
        if path.len() > MAX_PATH_BYTES {
            return Err(PathError::TooLong(path.len()));
        }
        for segment in path.split('/') {
            check_segment(segment)?;
        }
        Ok(Self(path.to_owned()))
    }

    /// Decode a percent-encoded URL path (as it appears in the request line)
    /// and validate it.
    pub fn from_url(encoded: &str) -> Result<Self, PathError> {
        Self::parse(&decode(encoded)?)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FilePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated listing prefix: empty (the root) or a folder path ending in `/`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Prefix(String);

impl Prefix {
    /// The root folder.
    pub fn root() -> Self {
        Self(String::new())
    }

    /// Validate an already percent-decoded folder path, with or without its
    /// trailing slash.
    pub fn parse(folder: &str) -> Result<Self, PathError> {
        let trimmed = folder.strip_suffix('/').unwrap_or(folder);
        if trimmed.is_empty() {
            return Ok(Self::root());
        }
        let path = FilePath::parse(trimmed)?;
        if path.0.len() + 1 > MAX_PATH_BYTES {
            return Err(PathError::TooLong(path.0.len() + 1));
        }
        Ok(Self(path.0 + "/"))
    }

    /// Decode a percent-encoded folder path and validate it.
    pub fn from_url(encoded: &str) -> Result<Self, PathError> {
        Self::parse(&decode(encoded)?)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The smallest string greater than every path under this prefix, or
    /// `None` for the root. Paths compare bytewise, and `0` follows `/`.
    pub fn upper_bound(&self) -> Option<String> {
        self.0.strip_suffix('/').map(|folder| format!("{folder}0"))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn decode(encoded: &str) -> Result<String, PathError> {
    // RFC 3986 2.1: `%` begins a two-hex-digit escape, always. Lenient
    // decoding would keep `%zz` as it is, and store a name a client cannot
    // have meant.
    let bytes = encoded.as_bytes();
    for (at, _) in encoded.match_indices('%') {
        let escape = bytes.get(at + 1..at + 3);
        if !escape.is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)) {
            return Err(PathError::BadPercentEncoding);
        }
    }
    percent_decode_str(encoded)
        .decode_utf8()
        .map(|decoded| decoded.into_owned())
        .map_err(|_| PathError::NotUtf8)
}

fn check_segment(segment: &str) -> Result<(), PathError> {
    if segment.is_empty() {
        return Err(PathError::EmptySegment);
    }
    if segment.len() > MAX_NAME_BYTES {
        return Err(PathError::NameTooLong(segment.len()));
    }
    if segment == "." || segment == ".." {
        return Err(PathError::DotSegment);
    }
    if segment.contains('\\') {
        return Err(PathError::Backslash);
    }
    if segment.chars().any(char::is_control) {
        return Err(PathError::ControlCharacter);
    }
    // A name that a second decoding would turn into a traversal is refused,
    // so no layer that decodes once more (a proxy, a client) can be fooled.
    if segment.contains('%') {
        let twice = percent_decode_str(segment).decode_utf8_lossy();
        if twice == "." || twice == ".." || twice.contains(['/', '\\']) {
            return Err(PathError::EncodedTraversal);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_paths() {
        for ok in [
            "a",
            "a/b/c.txt",
            "photos/2024/IMG 0001.jpg",
            "ünï/cødé",
            "a.b..c",
            "...",
        ] {
            assert_eq!(FilePath::parse(ok).map(|p| p.0), Ok(ok.to_owned()), "{ok}");
        }
    }

    #[test]
    fn refuses_bad_paths() {
        let long_name = "x".repeat(MAX_NAME_BYTES + 1);
        let long_path = vec!["y".repeat(100); 11].join("/");
        let cases: &[(&str, PathError)] = &[
            ("", PathError::Empty),
            ("a//b", PathError::EmptySegment),
            ("/a", PathError::EmptySegment),
            ("a/", PathError::EmptySegment),
            ("..", PathError::DotSegment),
            ("a/../b", PathError::DotSegment),
            ("./a", PathError::DotSegment),
            ("a\\b", PathError::Backslash),
            ("a\0b", PathError::ControlCharacter),
            ("a\nb", PathError::ControlCharacter),
            ("%2e%2e", PathError::EncodedTraversal),
            ("a/%2E/b", PathError::EncodedTraversal),
            ("a%2fb", PathError::EncodedTraversal),
            ("a%5Cb", PathError::EncodedTraversal),
            (&long_name, PathError::NameTooLong(MAX_NAME_BYTES + 1)),
            (&long_path, PathError::TooLong(long_path.len())),
        ];
        for (bad, expected) in cases {
            assert_eq!(FilePath::parse(bad).as_ref(), Err(expected), "{bad:?}");
        }
    }

    #[test]
    fn decodes_urls_before_validating() {
        assert_eq!(
            FilePath::from_url("a%20b/c").map(|p| p.0),
            Ok("a b/c".to_owned())
        );
        assert_eq!(FilePath::from_url("a/%2e%2e/b"), Err(PathError::DotSegment));
        assert_eq!(FilePath::from_url("a%2F..%2Fb"), Err(PathError::DotSegment));
        assert_eq!(
            FilePath::from_url("%252e%252e"),
            Err(PathError::EncodedTraversal)
        );
        assert_eq!(
            FilePath::from_url("a%00b"),
            Err(PathError::ControlCharacter)
        );
        assert_eq!(FilePath::from_url("%ff"), Err(PathError::NotUtf8));
        for bad in ["bad%zz", "trunc%2", "%", "a%g0b"] {
            assert_eq!(
                FilePath::from_url(bad),
                Err(PathError::BadPercentEncoding),
                "{bad}"
            );
        }
        assert_eq!(
            FilePath::from_url("100%25").map(|p| p.0),
            Ok("100%".to_owned())
        );
    }

    #[test]
    fn prefixes() {
        assert_eq!(Prefix::parse("").map(|p| p.0), Ok(String::new()));
        assert_eq!(Prefix::parse("/").map(|p| p.0), Ok(String::new()));
        assert_eq!(Prefix::parse("a/b").map(|p| p.0), Ok("a/b/".to_owned()));
        assert_eq!(Prefix::parse("a/b/").map(|p| p.0), Ok("a/b/".to_owned()));
        assert_eq!(Prefix::parse("a//"), Err(PathError::EmptySegment));
        assert_eq!(Prefix::parse("../"), Err(PathError::DotSegment));
        assert_eq!(Prefix::root().upper_bound(), None);
        let prefix = Prefix::parse("a/b/").expect("valid");
        assert_eq!(prefix.upper_bound().as_deref(), Some("a/b0"));
    }
}
