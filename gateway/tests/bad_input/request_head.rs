//! The request's head as HTTP/1.1 frames it (RFC 9112): the request line,
//! header syntax, line ends, and heads too large or never finished.

use crate::support::{Area, CLOSED, Case, Phase, RawRequest as _, case, get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_heads_are_refused_and_write_nothing() {
    Area {
        name: "request head",
        both: cases,
        accounts: |_| Vec::new(),
    }
    .check()
    .await;
}

/// In both modes: `p.user` is the credential line; `p.text_sha` is the
/// digest of `keep/a.txt` in the tree it reaches.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    let text_sha = p.text_sha;
    vec![
        // ---- Request line and header syntax: hyper's 400 (RFC 9112).
        case(
            "junk after version",
            format!(
                "GET /files/keep/a.txt HTTP/1.1 extra\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"
            ),
            &[400],
        ),
        // RFC 9110 would allow 505; hyper answers 400 for any version it
        // does not parse.
        case(
            "HTTP/2.0 in an HTTP/1 line",
            format!(
                "GET /files/keep/a.txt HTTP/2.0\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"
            ),
            &[400, 505],
        ),
        // RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request
        // without Host, or with more than one.
        case(
            "no Host",
            format!("GET /files/keep/a.txt HTTP/1.1\r\n{u}Connection: close\r\n\r\n"),
            &[400],
        ),
        case(
            "two Hosts",
            get("/files/keep/a.txt", u, "Host: other\r\n"),
            &[400],
        ),
        case(
            "two spaces in request line",
            format!(
                "GET  /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"
            ),
            &[400],
        ),
        // RFC 9112 2.2: whitespace before the first header must not pass.
        case(
            "space before first header",
            format!(
                "GET /files/keep/a.txt HTTP/1.1\r\n X-A: 1\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"
            ),
            &[400],
        ),
        // A bare CR must be refused (RFC 9112 2.2).
        case(
            "bare CR",
            format!(
                "GET /files/keep/a.txt HTTP/1.1\rHost: localhost\r\n{u}Connection: close\r\n\r\n"
            ),
            &[400],
        ),
        // Bare LF line ends are allowed (RFC 9112 2.2): an ordinary GET.
        case(
            "bare LF",
            get("/files/keep/a.txt", u, "").replace_bytes(b"\r\n", b"\n"),
            &[200],
        )
        .header("etag", text_sha),
        // hyper serves HTTP/1 only here: it closes on the HTTP/2 preface
        // without an answer (status 0); a 400 or 505 would do as well.
        case(
            "HTTP/2 preface",
            &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
            &[CLOSED, 400, 505],
        ),
        // A head that never ends: closed at --header-timeout (2 s here).
        // hyper closes without a response (status 0); 408 would do too.
        case(
            "unfinished head",
            format!("GET /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}"),
            &[CLOSED, 408],
        ),
        // RFC 9112 5.1: whitespace between name and colon MUST get 400.
        case(
            "space before colon",
            get("/files/keep/a.txt", u, "X-Bad : 1\r\n"),
            &[400],
        ),
        case(
            "header without colon",
            get("/files/keep/a.txt", u, "NoColonHere\r\n"),
            &[400],
        ),
        // Obsolete line folding: RFC 9112 5.2 lets a server refuse it (400).
        case(
            "obs-fold",
            get("/files/keep/a.txt", u, "X-Folded: a\r\n b\r\n"),
            &[400],
        ),
        case(
            "NUL in header value",
            get("/files/keep/a.txt", u, "X-Nul: a\0b\r\n"),
            &[400],
        ),
        case(
            "vertical tab in header value",
            get("/files/keep/a.txt", u, "X-Vt: a\x0bb\r\n"),
            &[400],
        ),
        // A careful server caps the head (nginx: 8 KiB a line, 32 KiB in
        // all) and answers 431 (RFC 6585); hyper's default buffer is 400 KiB.
        case(
            "100 KiB header",
            get(
                "/files/keep/a.txt",
                u,
                &format!("X-Big: {}\r\n", "a".repeat(100 << 10)),
            ),
            &[431],
        ),
        case(
            "150 headers",
            get(
                "/files/keep/a.txt",
                u,
                &(0..150)
                    .map(|i| format!("X-H-{i}: v\r\n"))
                    .collect::<String>(),
            ),
            &[431],
        ),
    ]
}
