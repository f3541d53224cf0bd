//! `ListObjectVersions` in S3's order. S3 lists a bucket's versions and
//! delete markers as one sequence (key by key, each key's newest first),
//! `<Version>` and `<DeleteMarker>` elements interleaved; `s3s` writes the
//! two kinds in two runs (and the common prefixes first). Clients that
//! read the document in order (a conformance suite does) see markers
//! before versions of earlier keys. This puts them back in one sequence.

use axum::http::{Method, StatusCode};
use axum::response::IntoResponse as _;

/// Largest listing reordered (1000 entries of long keys fit well within).
const MAX_LISTING: usize = 16 << 20;

/// Answer a `GET ?versions` with its entries in S3's order.
pub(crate) async fn versions_in_order(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let listing = request.method() == Method::GET
        && request.uri().query().is_some_and(|query| {
            query
                .split('&')
                .any(|pair| pair == "versions" || pair.starts_with("versions="))
        });
    let response = next.run(request).await;
    if !listing || response.status() != StatusCode::OK {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_LISTING).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "the listing was too large",
        )
            .into_response();
    };
    let body = match std::str::from_utf8(&bytes) {
        Ok(text) => reordered(text).map_or(bytes.clone(), bytes::Bytes::from),
        Err(_) => bytes.clone(),
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    axum::response::Response::from_parts(parts, axum::body::Body::from(body))
}

/// One `<Version>` or `<DeleteMarker>` element.
struct Entry<'a> {
    xml: &'a str,
    key: String,
    latest: bool,
    modified: &'a str,
}

/// `document` with its entries merged into one sequence after its other
/// fields, common prefixes last; `None` if it is not a listing.
fn reordered(document: &str) -> Option<String> {
    const END: &str = "</ListVersionsResult>";
    let end = document.rfind(END)?;
    let url_encoded = document.contains("<EncodingType>url</EncodingType>");
    let mut rest = String::with_capacity(document.len());
    let (mut versions, mut markers, mut prefixes) = (Vec::new(), Vec::new(), Vec::new());
    let mut at = 0;
    let body = &document[..end];
    while at < body.len() {
        let next = ["<Version>", "<DeleteMarker>", "<CommonPrefixes>"]
            .iter()
            .filter_map(|open| body[at..].find(open).map(|found| (at + found, *open)))
            .min_by_key(|(found, _)| *found);
        let Some((start, open)) = next else {
            rest.push_str(&body[at..]);
            break;
        };
        rest.push_str(&body[at..start]);
        let close = format!("</{}", &open[1..]);
        let stop = start + body[start..].find(&close)? + close.len();
        let xml = &body[start..stop];
        match open {
            "<CommonPrefixes>" => prefixes.push(xml),
            _ => {
                let entry = Entry {
                    xml,
                    key: key_of(text_of(xml, "Key")?, url_encoded),
                    latest: text_of(xml, "IsLatest") == Some("true"),
                    modified: text_of(xml, "LastModified").unwrap_or_default(),
                };
                if open == "<Version>" {
                    versions.push(entry);
                } else {
                    markers.push(entry);
                }
            }
        }
        at = stop;
    }
    // Both runs are in S3's order already: merge them.
    let (mut versions, mut markers) = (
        versions.into_iter().peekable(),
        markers.into_iter().peekable(),
    );
    loop {
        let entry = match (versions.peek(), markers.peek()) {
            (Some(version), Some(marker)) => {
                if comes_first(marker, version) {
                    markers.next()
                } else {
                    versions.next()
                }
            }
            (Some(_), None) => versions.next(),
            (None, Some(_)) => markers.next(),
            (None, None) => break,
        };
        if let Some(entry) = entry {
            rest.push_str(entry.xml);
        }
    }
    for prefix in prefixes {
        rest.push_str(prefix);
    }
    rest.push_str(&document[end..]);
    Some(rest)
}

/// Whether `a` comes before `b`: an earlier key, or of one key the latest,
/// then the newer.
fn comes_first(a: &Entry<'_>, b: &Entry<'_>) -> bool {
    match a.key.cmp(&b.key) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        std::cmp::Ordering::Equal => a.latest || (!b.latest && a.modified > b.modified),
    }
}

/// The text of `xml`'s first `<name>` element.
fn text_of<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let stop = start + xml[start..].find('<')?;
    Some(&xml[start..stop])
}

/// A key as written (XML-escaped, and percent-encoded with
/// `encoding-type=url`), as it compares: its bytes.
fn key_of(text: &str, url_encoded: bool) -> String {
    let unescaped = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&");
    if url_encoded {
        percent_encoding::percent_decode_str(&unescaped)
            .decode_utf8_lossy()
            .into_owned()
    } else {
        unescaped
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::reordered;

    #[test]
    fn markers_and_versions_are_one_sequence() {
        let document = "<?xml version=\"1.0\"?><ListVersionsResult><CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>\
            <DeleteMarker><IsLatest>true</IsLatest><Key>b</Key><LastModified>2026-01-01T00:00:03.000Z</LastModified></DeleteMarker>\
            <Name>x</Name>\
            <Version><IsLatest>true</IsLatest><Key>a</Key><LastModified>2026-01-01T00:00:01.000Z</LastModified></Version>\
            <Version><IsLatest>false</IsLatest><Key>b</Key><LastModified>2026-01-01T00:00:02.000Z</LastModified></Version>\
            </ListVersionsResult>";
        let out = reordered(document).unwrap();
        let a = out.find("<Key>a</Key>").unwrap();
        let marker = out.find("<DeleteMarker>").unwrap();
        let b_version = out.rfind("<Key>b</Key>").unwrap();
        let prefixes = out.find("<CommonPrefixes>").unwrap();
        assert!(out.find("<Name>").unwrap() < a);
        assert!(a < marker && marker < b_version && b_version < prefixes);
        assert!(out.ends_with("</ListVersionsResult>"));
    }
}
