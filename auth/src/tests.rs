use super::*;
use axum::http::HeaderValue;

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            header::HeaderName::from_bytes(name.as_bytes()).unwrap_or(header::WARNING),
            HeaderValue::from_str(value).unwrap_or(HeaderValue::from_static("x")),
        );
    }
    map
}

#[test]
fn credentials_are_read_from_authorization_then_the_cookie() {
    let basic = |text: &str| format!("Basic {}", STANDARD.encode(text));
    let read = |pairs: &[(&str, &str)]| Credentials::from_headers(&headers(pairs));
    assert_eq!(
        read(&[("authorization", "Bearer wst_abc")]),
        Some(Credentials::Token("wst_abc".into()))
    );
    assert_eq!(
        read(&[("authorization", &basic("alice:pw:with:colons"))]),
        Some(Credentials::Password {
            name: "alice".into(),
            password: "pw:with:colons".into()
        })
    );
    assert_eq!(
        read(&[("authorization", &basic("alice:wst_t"))]),
        Some(Credentials::NamedToken {
            name: "alice".into(),
            token: "wst_t".into()
        })
    );
    for bad in ["Bearer", "Bearer ", "Basic !!!", "Digest x", "Basic Zm9v"] {
        assert_eq!(
            read(&[("authorization", bad)]),
            Some(Credentials::Malformed),
            "{bad}"
        );
    }
    assert_eq!(
        read(&[("cookie", "a=b; wst_session=xyz; c=d")]),
        Some(Credentials::Session("xyz".into()))
    );
    assert_eq!(read(&[("cookie", "wst_session=")]), None);
    assert_eq!(read(&[]), None);
}

#[test]
fn other_sites_and_other_names_are_told_apart() {
    let host = (header::HOST.as_str(), "127.0.0.1:8080");
    assert!(!from_another_site(&headers(&[host])));
    assert!(!from_another_site(&headers(&[
        host,
        ("origin", "http://127.0.0.1:8080")
    ])));
    assert!(from_another_site(&headers(&[
        host,
        ("origin", "https://evil.example")
    ])));
    assert!(from_another_site(&headers(&[host, ("origin", "null")])));
    assert!(from_another_site(&headers(&[
        host,
        ("sec-fetch-site", "cross-site")
    ])));
    assert!(!from_another_site(&headers(&[
        host,
        ("sec-fetch-site", "same-origin")
    ])));
    for name in [
        "localhost",
        "LOCALHOST:80",
        "127.0.0.1",
        "127.1.2.3:9",
        "[::1]:8080",
    ] {
        assert!(addressed_to_loopback(&headers(&[("host", name)])), "{name}");
    }
    for name in [
        "evil.example",
        "evil.example:8080",
        "10.0.0.1",
        "[2001:db8::1]",
    ] {
        assert!(
            !addressed_to_loopback(&headers(&[("host", name)])),
            "{name}"
        );
    }
}

#[test]
fn csrf_tokens_compare_exactly() {
    assert!(csrf_matches(&headers(&[(CSRF_HEADER, "abc")]), "abc"));
    assert!(!csrf_matches(&headers(&[(CSRF_HEADER, "abd")]), "abc"));
    assert!(!csrf_matches(&headers(&[(CSRF_HEADER, "ab")]), "abc"));
    assert!(!csrf_matches(&headers(&[]), "abc"));
}
