//! Hostile and malformed requests, sent as raw bytes over TCP so that
//! nothing on the way fixes them: each gets the status a careful server
//! gives (hyper's own where the request never reaches the application),
//! and none of them stores, replaces or deletes a file, leaves a blob or a
//! temp file behind, or changes a setting.
//!
//! One gateway, two phases: open (no user yet: anonymous requests reach
//! the open tree), then with users `alice` (1 MiB quota) and `root`
//! (admin), where the same table runs again authenticated, followed by
//! the cases about accounts: credentials, CSRF, sign-in, quota, share links.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use common::{TestServer, blob_files, random_bytes, sha256_hex};
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `--max-body` for this test: small, so that "too large" is cheap to send.
const MAX_BODY: u64 = 64 << 10;
/// alice's quota.
const QUOTA: u64 = 1 << 20;
/// The status recorded when the server closed the connection without a
/// response. Allowed only where hyper legitimately does that.
const CLOSED: u16 = 0;
/// The status recorded when nothing came back within the case's wait.
const NO_ANSWER: u16 = 999;
/// How long a case waits for its answer unless it says otherwise.
const WAIT: Duration = Duration::from_secs(15);
/// The size of `keep/a.txt` in every tree.
const TEXT_SIZE: usize = 1000;

/// One hostile request and what a careful server answers.
struct Case {
    name: String,
    request: Vec<u8>,
    /// Acceptable statuses: the first is the answer this test argues for;
    /// others only where a comment says why.
    expect: Vec<u16>,
    /// The JSON `error` code, checked when the status is `expect[0]`.
    error: Option<&'static str>,
    /// A header (lowercase name) one of whose values must contain this text,
    /// checked when the status is `expect[0]`.
    header: Option<(&'static str, String)>,
    /// Shut down our sending side once the request is out.
    half_close: bool,
    wait: Duration,
}

fn case(name: impl Into<String>, request: impl Into<Vec<u8>>, expect: &[u16]) -> Case {
    Case {
        name: name.into(),
        request: request.into(),
        expect: expect.to_vec(),
        error: None,
        header: None,
        half_close: false,
        wait: WAIT,
    }
}

impl Case {
    fn error(mut self, code: &'static str) -> Self {
        self.error = Some(code);
        self
    }

    fn header(mut self, name: &'static str, contains: impl Into<String>) -> Self {
        self.header = Some((name, contains.into()));
        self
    }

    fn half_close(mut self) -> Self {
        self.half_close = true;
        self
    }

    fn wait(mut self, seconds: u64) -> Self {
        self.wait = Duration::from_secs(seconds);
        self
    }
}

/// A request with `Host`, the credentials line `auth` (empty, or a header
/// line ending in CRLF), `headers` (each ending in CRLF), `Connection:
/// close` and, with a body, its `Content-Length`.
fn request(method: &str, target: &str, auth: &str, headers: &str, body: Option<&[u8]>) -> Vec<u8> {
    let mut out = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\n{auth}{headers}Connection: close\r\n"
    )
    .into_bytes();
    if let Some(body) = body {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if let Some(body) = body {
        out.extend_from_slice(body);
    }
    out
}

fn get(target: &str, auth: &str, headers: &str) -> Vec<u8> {
    request("GET", target, auth, headers, None)
}

fn put(target: &str, auth: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    request("PUT", target, auth, headers, Some(body))
}

/// A head whose `headers` frame the body themselves (chunked, a lying or
/// absent length), then `raw_body` as is.
fn framed(method: &str, target: &str, auth: &str, headers: &str, raw_body: &[u8]) -> Vec<u8> {
    let mut out = request(method, target, auth, headers, None);
    out.extend_from_slice(raw_body);
    out
}

/// `data` in chunked coding, `piece` bytes a chunk, with its last chunk.
fn chunked(data: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(piece) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

fn basic(credentials: &str) -> String {
    format!("Authorization: Basic {}\r\n", BASE64.encode(credentials))
}

fn admin_json(auth: &str, json: &[u8]) -> Vec<u8> {
    put(
        "/admin/estimator",
        auth,
        "Content-Type: application/json\r\n",
        json,
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// No user: anonymous requests, the open tree.
    Open,
    /// Users exist: the table's requests carry alice's (files) or root's
    /// (admin) token.
    Users,
}

/// The cases that need no account, for either mode: `user` and `admin`
/// are credential lines (empty in open mode); `text_sha` is the digest of
/// `keep/a.txt` (1000 bytes) in the tree they reach.
fn table(mode: Mode, user: &str, admin: &str, text_sha: &str) -> Vec<Case> {
    let u = user;
    let long_path = vec!["d".repeat(99); 20].join("/");
    assert_eq!(long_path.len(), 1999);
    let mut cases = vec![
        // ---- Paths: every refused form is 400 bad_path, decided before
        // a byte of any body is read.
        case("GET ..", get("/files/../etc/passwd", u, ""), &[400]).error("bad_path"),
        case("PUT a/../b", put("/files/a/../b", u, "", b"x"), &[400]).error("bad_path"),
        case(
            "GET %2e%2e",
            get("/files/%2e%2e/%2e%2e/etc/passwd", u, ""),
            &[400],
        )
        .error("bad_path"),
        case(
            "PUT %2e%2e%2f",
            put("/files/%2e%2e%2fescape", u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        case("PUT .%2e/x", put("/files/.%2e/x", u, "", b"x"), &[400]).error("bad_path"),
        case(
            "PUT %252e%252e (double-encoded)",
            put("/files/%252e%252e/x", u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        case("GET %00", get("/files/keep/a.txt%00.jpg", u, ""), &[400]).error("bad_path"),
        // An encoded CRLF would split the Location header if it got through.
        case(
            "PUT %0d%0a",
            put("/files/evil%0d%0aX-Injected:%20yes", u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        case("PUT %ff (not UTF-8)", put("/files/%ff.txt", u, "", b"x"), &[400]).error("bad_path"),
        case("PUT %5C", put("/files/a%5Cb", u, "", b"x"), &[400]).error("bad_path"),
        // A raw backslash: hyper refuses the target (400, no JSON) or the
        // path check does (400 bad_path); either is 400.
        case("GET raw backslash", get("/files/keep\\a.txt", u, ""), &[400]),
        case("PUT a//b", put("/files/a//b", u, "", b"x"), &[400]).error("bad_path"),
        case(
            "PUT 2000-byte path",
            put(&format!("/files/{long_path}x"), u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        case(
            "GET 2000-byte path",
            get(&format!("/files/{long_path}x"), u, ""),
            &[400],
        )
        .error("bad_path"),
        case(
            "PUT 300-byte name",
            put(&format!("/files/{}", "n".repeat(300)), u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        // Names are exact: no trailing-dot, case or space folding that
        // could alias another file (as Windows would).
        case("GET trailing dot", get("/files/keep/a.txt.", u, ""), &[404]).error("not_found"),
        case("GET folder with dot", get("/files/keep./a.txt", u, ""), &[404]).error("not_found"),
        case("GET other case", get("/files/KEEP/A.TXT", u, ""), &[404]).error("not_found"),
        case("GET trailing %20", get("/files/keep/a.txt%20", u, ""), &[404]).error("not_found"),
        case("PUT folder path", put("/files/keep/", u, "", b"x"), &[400]).error("bad_request"),
        case("POST folder path", request("POST", "/files/keep/", u, "", Some(&b"x"[..])), &[400])
            .error("bad_request"),
        case(
            "DELETE folder path",
            request("DELETE", "/files/keep/", u, "", None),
            &[400],
        )
        .error("bad_path"),
        // A folder is not a file: deleting its name deletes nothing.
        case(
            "DELETE folder name",
            request("DELETE", "/files/keep", u, "", None),
            &[404],
        )
        .error("not_found"),
        // `%zz` and a cut-off `%2` are not percent-encoding (RFC 3986
        // 2.1): the request-target is invalid, and RFC 9112 3.2 says 400
        // rather than storing a name the client did not mean.
        case("PUT %zz", put("/files/bad%zz", u, "", b"x"), &[400]).error("bad_path"),
        case("PUT trailing %2", put("/files/trunc%2", u, "", b"x"), &[400]).error("bad_path"),
        case(
            "GET raw 0xff in target",
            [
                b"GET /files/\xff HTTP/1.1\r\nHost: localhost\r\n".as_slice(),
                u.as_bytes(),
                b"Connection: close\r\n\r\n".as_slice(),
            ]
            .concat(),
            &[400],
        ),
        case(
            "GET raw NUL in target",
            [
                b"GET /files/a\0b HTTP/1.1\r\nHost: localhost\r\n".as_slice(),
                u.as_bytes(),
                b"Connection: close\r\n\r\n".as_slice(),
            ]
            .concat(),
            &[400],
        ),
        case("GET space in target", get("/files/a b", u, ""), &[400]),
        // Past hyper's 64 KiB target limit: 414. A server that caps the
        // whole head below that answers 431 first, as fine.
        case(
            "GET 70000-byte target",
            get(&format!("/files/{}", "a".repeat(70_000)), u, ""),
            &[414, 431],
        ),
        // Not normalised into a route: no such resource (or refused).
        case("GET //files", get("//files/keep/a.txt", u, ""), &[404, 400]),
        case(
            "GET /admin/../files",
            get("/admin/../files/keep/a.txt", u, ""),
            &[404, 400],
        ),
        case("GET limit=abc", get("/files/keep/?limit=abc", u, ""), &[400]).error("bad_request"),
        case(
            "GET limit=2^40",
            get("/files/keep/?limit=1099511627776", u, ""),
            &[400],
        )
        .error("bad_request"),
        case(
            "POST share expires=0",
            request("POST", "/files/keep/a.txt?share&expires=0", u, "", Some(&b""[..])),
            &[400],
        )
        .error("bad_request"),
        case(
            "POST share expires overflow",
            request(
                "POST",
                "/files/keep/a.txt?share&expires=99999999999999999999",
                u,
                "",
                Some(&b""[..]),
            ),
            &[400],
        )
        .error("bad_request"),
        // ---- Methods: axum answers 405 (with Allow) for a method a route
        // lacks; a method that is not a token is hyper's 400.
        case("PATCH", request("PATCH", "/files/keep/a.txt", u, "", Some(&b"x"[..])), &[405])
            .header("allow", "GET"),
        case("TRACE", get("/files/keep/a.txt", u, "").replace_method("TRACE"), &[405]),
        // CONNECT with an origin-form target is malformed (RFC 9110 9.3.6
        // wants authority-form): 400, or 405 as for any method the route
        // lacks. Never a tunnel.
        case(
            "CONNECT origin-form",
            get("/files/keep/a.txt", u, "").replace_method("CONNECT"),
            &[405, 400],
        ),
        // A real proxy request: this is no proxy. 405/501 say so; axum has
        // no route for the empty path and says 404; all refuse, none tunnel.
        case(
            "CONNECT authority-form",
            format!("CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n{u}Connection: close\r\n\r\n"),
            &[405, 400, 404, 501],
        ),
        case("FOOBAR", get("/files/keep/a.txt", u, "").replace_method("FOOBAR"), &[405]),
        // Methods are case-sensitive: `get` is an unknown method, not GET.
        case("lowercase get", get("/files/keep/a.txt", u, "").replace_method("get"), &[405]),
        case("method G(T", get("/files/keep/a.txt", u, "").replace_method("G(T"), &[400]),
        case("BREW /admin/pool", get("/admin/pool", admin, "").replace_method("BREW"), &[405]),
        case(
            "DELETE /admin/estimator",
            request("DELETE", "/admin/estimator", admin, "", None),
            &[405],
        ),
        case("PUT /files/", put("/files/", u, "", b"x"), &[405]),
        case("DELETE /files/", request("DELETE", "/files/", u, "", None), &[405]),
        // ---- Request line and header syntax: hyper's 400 (RFC 9112).
        case(
            "junk after version",
            format!("GET /files/keep/a.txt HTTP/1.1 extra\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"),
            &[400],
        ),
        // RFC 9110 would allow 505; hyper answers 400 for any version it
        // does not parse.
        case(
            "HTTP/2.0 in an HTTP/1 line",
            format!("GET /files/keep/a.txt HTTP/2.0\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"),
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
            format!("GET  /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"),
            &[400],
        ),
        // RFC 9112 2.2: whitespace before the first header must not pass.
        case(
            "space before first header",
            format!("GET /files/keep/a.txt HTTP/1.1\r\n X-A: 1\r\nHost: localhost\r\n{u}Connection: close\r\n\r\n"),
            &[400],
        ),
        // A bare CR must be refused (RFC 9112 2.2).
        case(
            "bare CR",
            format!("GET /files/keep/a.txt HTTP/1.1\rHost: localhost\r\n{u}Connection: close\r\n\r\n"),
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
                &(0..150).map(|i| format!("X-H-{i}: v\r\n")).collect::<String>(),
            ),
            &[431],
        ),
        // ---- Content-Length: not a number, or two different ones, is
        // hyper's 400 (RFC 9112 6.3: unrecoverable framing error).
        case(
            "Content-Length abc",
            framed("PUT", "/files/cl.bin", u, "Content-Length: abc\r\n", b"xyz"),
            &[400],
        ),
        case(
            "Content-Length -1",
            framed("PUT", "/files/cl.bin", u, "Content-Length: -1\r\n", b""),
            &[400],
        ),
        case(
            "Content-Length +5",
            framed("PUT", "/files/cl.bin", u, "Content-Length: +5\r\n", b"12345"),
            &[400],
        ),
        case(
            "Content-Length 5, 6",
            framed("PUT", "/files/cl.bin", u, "Content-Length: 5, 6\r\n", b"12345"),
            &[400],
        ),
        case(
            "two Content-Lengths",
            framed(
                "PUT",
                "/files/cl.bin",
                u,
                "Content-Length: 5\r\nContent-Length: 6\r\n",
                b"123456",
            ),
            &[400],
        ),
        case(
            "Content-Length overflows u64",
            framed(
                "PUT",
                "/files/cl.bin",
                u,
                "Content-Length: 99999999999999999999999\r\n",
                b"",
            ),
            &[400],
        ),
        // Over --max-body: 413 from the declared length alone; no body is
        // sent, so a server that waited for it would time out instead.
        case(
            "Content-Length max-body + 1",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                &format!("Content-Length: {}\r\n", MAX_BODY + 1),
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        case(
            "Content-Length 1 PB",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                "Content-Length: 1000000000000000\r\n",
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        // u64::MAX is a length hyper reserves for itself: it answers 431
        // before the application sees the request. 413 would be nicer.
        case(
            "Content-Length u64::MAX",
            framed(
                "POST",
                "/files/big.bin",
                u,
                "Content-Length: 18446744073709551615\r\n",
                b"",
            ),
            &[413, 431],
        ),
        // Expect: 100-continue over the limit: the final 413 comes first,
        // never a 100 that invites the body (RFC 9110 10.1.1).
        case(
            "Expect 100-continue, too large",
            framed(
                "PUT",
                "/files/big.bin",
                u,
                "Expect: 100-continue\r\nContent-Length: 1000000\r\n",
                b"",
            ),
            &[413],
        )
        .error("body_too_large"),
        // ---- Chunked bodies that lie: hyper fails the body, the upload
        // fails with 400 and nothing is stored.
        case(
            "chunk size zz",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"zz\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "chunk size overflow",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"fffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "chunk shorter than its size",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"5\r\n0123456789\r\n0\r\n\r\n",
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "20 KiB chunk extension",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                &[
                    b"5;".as_slice(),
                    "x".repeat(20 << 10).as_bytes(),
                    b"\r\nhello\r\n0\r\n\r\n".as_slice(),
                ]
                .concat(),
            ),
            &[400],
        )
        .error("bad_request"),
        // RFC 9112 6.1: a request whose last transfer coding is not
        // chunked MUST get 400.
        case(
            "Transfer-Encoding gzip",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: gzip\r\n",
                b"hello",
            ),
            &[400],
        ),
        case(
            "Transfer-Encoding chunked then identity",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n",
                b"5\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        ),
        case(
            "Transfer-Encoding with space before colon",
            framed(
                "PUT",
                "/files/chunked.bin",
                u,
                "Transfer-Encoding : chunked\r\n",
                b"5\r\nhello\r\n0\r\n\r\n",
            ),
            &[400],
        ),
        // RFC 9112 6.1: Transfer-Encoding in HTTP/1.0 is faulty framing.
        case(
            "Transfer-Encoding in HTTP/1.0",
            format!(
                "PUT /files/chunked.bin HTTP/1.0\r\nHost: localhost\r\n{u}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            ),
            &[400],
        ),
        // Request smuggling: Content-Length and Transfer-Encoding both.
        // RFC 9112 6.1: go by Transfer-Encoding (an empty body here) or
        // refuse (400), and in either case close the connection, so the
        // DELETE hidden behind the body never runs (one answer only).
        case(
            "CL+TE with a smuggled DELETE",
            [
                format!("PUT /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}If-None-Match: *\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
                format!("DELETE /files/keep/a.txt HTTP/1.1\r\nHost: localhost\r\n{u}\r\n"),
            ]
            .concat(),
            &[412, 400],
        )
        .error("already_exists"),
        // The client gives up mid-body and half-closes. hyper, which does
        // not keep half-closed connections, may drop it unanswered
        // (status 0); otherwise the failed body is a 400. Nothing stored.
        case(
            "chunked body cut off by EOF",
            framed(
                "PUT",
                "/files/cut.bin",
                u,
                "Transfer-Encoding: chunked\r\n",
                b"a\r\n0123456789\r\n",
            ),
            &[400, CLOSED],
        )
        .error("bad_request")
        .half_close(),
        case(
            "Content-Length body cut off by EOF",
            framed(
                "PUT",
                "/files/cut.bin",
                u,
                "Content-Length: 100\r\n",
                b"0123456789",
            ),
            &[400, CLOSED],
        )
        .error("bad_request")
        .half_close(),
        // ---- Range (RFC 9110 14): a malformed or unsupported Range is
        // ignored (200, the whole file); one that cannot be met is 416.
        case(
            "Range bytes=999999-",
            get("/files/keep/a.txt", u, "Range: bytes=999999-\r\n"),
            &[416],
        )
        .error("range_not_satisfiable")
        .header("content-range", format!("bytes */{TEXT_SIZE}")),
        case(
            "Range bytes=18446744073709551615-",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=18446744073709551615-\r\n",
            ),
            &[416],
        )
        .error("range_not_satisfiable"),
        // A zero-length suffix selects nothing: unsatisfiable (14.1.1).
        case(
            "Range bytes=-0",
            get("/files/keep/a.txt", u, "Range: bytes=-0\r\n"),
            &[416],
        )
        .error("range_not_satisfiable"),
        case(
            "Range bytes=abc",
            get("/files/keep/a.txt", u, "Range: bytes=abc\r\n"),
            &[200],
        ),
        case(
            "Range bytes=5-1",
            get("/files/keep/a.txt", u, "Range: bytes=5-1\r\n"),
            &[200],
        ),
        case(
            "Range items=0-1",
            get("/files/keep/a.txt", u, "Range: items=0-1\r\n"),
            &[200],
        ),
        // Several ranges may be served (206 multipart) or ignored (200).
        case(
            "Range bytes=0-1,5-6",
            get("/files/keep/a.txt", u, "Range: bytes=0-1,5-6\r\n"),
            &[200, 206],
        ),
        // A last-pos past the end is valid and means "to the end"; one
        // that does not fit in 64 bits may also be ignored as malformed.
        case(
            "Range bytes=0-<overflow>",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=0-99999999999999999999999\r\n",
            ),
            &[206, 200],
        ),
        // A suffix longer than the file means the whole file (14.1.2).
        case(
            "Range bytes=-u64::MAX",
            get(
                "/files/keep/a.txt",
                u,
                "Range: bytes=-18446744073709551615\r\n",
            ),
            &[206, 200],
        ),
        // Thousands of overlapping ranges: ignore them (200), or refuse
        // (416, RFC 9110 14.2); never amplify.
        case(
            "Range with 2000 ranges",
            get(
                "/files/keep/a.txt",
                u,
                &format!("Range: bytes={}\r\n", vec!["0-1"; 2000].join(",")),
            ),
            &[200, 416],
        ),
        // ---- If-None-Match (RFC 9110 13.1.2): `*` matches any current
        // file, so a GET gets 304; a weak tag compares weakly.
        case(
            "If-None-Match * on GET",
            get("/files/keep/a.txt", u, "If-None-Match: *\r\n"),
            &[304],
        ),
        case(
            "If-None-Match W/tag",
            get(
                "/files/keep/a.txt",
                u,
                &format!("If-None-Match: W/\"{text_sha}\"\r\n"),
            ),
            &[304],
        ),
        case(
            "If-None-Match unterminated",
            get("/files/keep/a.txt", u, "If-None-Match: \"unterminated\r\n"),
            &[200],
        ),
        case(
            "If-None-Match 8 KiB of commas",
            get(
                "/files/keep/a.txt",
                u,
                &format!("If-None-Match: {}\r\n", ",".repeat(8 << 10)),
            ),
            &[200],
        ),
        case(
            "If-None-Match * on PUT over a file",
            put("/files/keep/a.txt", u, "If-None-Match: *\r\n", b"other"),
            &[412],
        )
        .error("already_exists"),
        // ---- PUT /admin/estimator: anything but valid settings is 400,
        // and nothing changes.
        case("estimator: invalid JSON", admin_json(admin, b"{"), &[400]).error("bad_request"),
        case("estimator: empty body", admin_json(admin, b""), &[400]).error("bad_request"),
        case(
            "estimator: alpha a string",
            admin_json(admin, br#"{"alpha":"high"}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: alpha negative",
            admin_json(admin, br#"{"alpha":-0.5}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold negative",
            admin_json(admin, br#"{"threshold":-1}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: unknown field",
            admin_json(admin, br#"{"bogus":true}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold 1e400",
            admin_json(admin, br#"{"threshold":1e400}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: threshold 2^64",
            admin_json(admin, br#"{"threshold":18446744073709551616}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: restart_budget 1e308",
            admin_json(admin, br#"{"restart_budget":1e308}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: fixed without threshold",
            admin_json(admin, br#"{"mode":"fixed","threshold":0}"#),
            &[400],
        )
        .error("bad_request"),
        case(
            "estimator: NaN",
            admin_json(admin, br#"{"alpha":NaN}"#),
            &[400],
        )
        .error("bad_request"),
        // Deep nesting that fits the 64 KiB limit meets serde_json's
        // recursion limit (128): 400, no stack overflow.
        case(
            "estimator: nested 50000 deep",
            admin_json(
                admin,
                format!("{{\"mode\":{}", "[".repeat(50_000)).as_bytes(),
            ),
            &[400],
        )
        .error("bad_request"),
        // Settings are a few fields: a body past 64 KiB is refused unread.
        case(
            "estimator: 2 MB body",
            admin_json(
                admin,
                format!("{{\"mode\":\"{}\"}}", "m".repeat(2_000_000 - 11)).as_bytes(),
            ),
            &[413],
        )
        .error("body_too_large"),
    ];
    // Past --max-body without a length: cut off at the limit, 413. With a
    // quota (alice has less than --max-body left) the cut comes at the
    // quota first: 507.
    let over_max_body = random_bytes(MAX_BODY as usize + 1000);
    let chunked_over = framed(
        "PUT",
        "/files/chunked-big.bin",
        u,
        "Transfer-Encoding: chunked\r\n",
        &chunked(&over_max_body, 16 << 10),
    );
    cases.push(match mode {
        Mode::Open => case("chunked past max-body", chunked_over, &[413]).error("body_too_large"),
        Mode::Users => case("chunked past max-body", chunked_over, &[507]).error("quota_exceeded"),
    });
    cases
}

/// What the account cases need.
struct Accounts {
    alice: String,
    root: String,
    alice_cookie: String,
    alice_csrf: String,
    root_cookie: String,
    root_csrf: String,
    /// A live share token for alice's `keep/a.txt`.
    share: String,
}

/// The cases about accounts (users exist). At most 9 of them present
/// wrong credentials: the 11th failure in a minute from one address would
/// lock the test itself out (429) for the checks that follow.
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice = bearer(&a.alice);
    let root = bearer(&a.root);
    let alice_cookie = format!("Cookie: wst_session={}\r\n", a.alice_cookie);
    let root_cookie = format!("Cookie: wst_session={}\r\n", a.root_cookie);
    let share = &a.share;
    let (id, rest) = share.split_once('.').unwrap();
    let (expires, signature) = rest.split_once('.').unwrap();
    let mut flipped_id = id.to_owned();
    let last = flipped_id.pop().unwrap();
    flipped_id.push(if last == 'A' { 'B' } else { 'A' });
    let json = "Content-Type: application/json\r\n";
    vec![
        // ---- No credentials (not counted as failures): 401 with both
        // challenges; the same for a file that exists and one that does not.
        case(
            "no credentials: GET",
            get("/files/keep/a.txt", "", ""),
            &[401],
        )
        .error("unauthorized")
        .header("www-authenticate", "Basic realm=\"wasm-storage\""),
        case(
            "no credentials: GET missing",
            get("/files/nope", "", ""),
            &[401],
        )
        .error("unauthorized")
        .header("www-authenticate", "Bearer realm=\"wasm-storage\""),
        case(
            "no credentials: PUT",
            put("/files/sneaky.txt", "", "", b"x"),
            &[401],
        )
        .error("unauthorized"),
        case(
            "no credentials: DELETE",
            request("DELETE", "/files/keep/a.txt", "", "", None),
            &[401],
        )
        .error("unauthorized"),
        case("no credentials: listing", get("/files/", "", ""), &[401]).error("unauthorized"),
        case(
            "no credentials: /admin/pool",
            get("/admin/pool", "", ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "no credentials: /auth/session",
            get("/auth/session", "", ""),
            &[401],
        )
        .error("unauthorized"),
        // ---- Signed in, but not allowed.
        case(
            "alice: GET /admin/pool",
            get("/admin/pool", &alice, ""),
            &[403],
        )
        .error("forbidden"),
        case(
            "alice: PUT /admin/estimator",
            admin_json(&alice, br#"{"mode":"monitor"}"#),
            &[403],
        )
        .error("forbidden"),
        // Another user's file is not found, never forbidden (names do not leak).
        case(
            "alice: GET root's file",
            get("/files/root-only.txt", &alice, ""),
            &[404],
        )
        .error("not_found"),
        case(
            "alice: DELETE root's file",
            request("DELETE", "/files/root-only.txt", &alice, "", None),
            &[404],
        )
        .error("not_found"),
        // ---- CSRF: a cookie-authenticated request that changes state
        // needs the session's X-CSRF-Token, else 403 csrf.
        case(
            "cookie DELETE without CSRF",
            request("DELETE", "/files/keep/a.txt", &alice_cookie, "", None),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie DELETE with a wrong CSRF",
            request(
                "DELETE",
                "/files/keep/a.txt",
                &alice_cookie,
                "X-CSRF-Token: wrong\r\n",
                None,
            ),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie DELETE with an empty CSRF",
            request(
                "DELETE",
                "/files/keep/a.txt",
                &alice_cookie,
                "X-CSRF-Token: \r\n",
                None,
            ),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie DELETE with root's CSRF",
            request(
                "DELETE",
                "/files/keep/a.txt",
                &alice_cookie,
                &format!("X-CSRF-Token: {}\r\n", a.root_csrf),
                None,
            ),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie PUT without CSRF",
            put("/files/keep/a.txt", &alice_cookie, "", b"replaced"),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie share without CSRF",
            request(
                "POST",
                "/files/keep/a.txt?share",
                &alice_cookie,
                "",
                Some(&b""[..]),
            ),
            &[403],
        )
        .error("csrf"),
        case(
            "cookie logout without CSRF",
            request("POST", "/auth/logout", &alice_cookie, "", Some(&b""[..])),
            &[403],
        )
        .error("csrf"),
        case(
            "root cookie with alice's CSRF",
            admin_json(
                &format!("{root_cookie}X-CSRF-Token: {}\r\n", a.alice_csrf),
                br#"{"mode":"monitor"}"#,
            ),
            &[403],
        )
        .error("csrf"),
        case(
            "root cookie PUT /admin/estimator without CSRF",
            admin_json(&root_cookie, br#"{"mode":"monitor"}"#),
            &[403],
        )
        .error("csrf"),
        // ---- Sign-in requests that are refused before any password check.
        case(
            "login from another site",
            request(
                "POST",
                "/auth/login",
                "",
                &format!("{json}Origin: http://evil.example\r\n"),
                Some(&br#"{"name":"alice","password":"pw-alice-123"}"#[..]),
            ),
            &[403],
        )
        .error("forbidden"),
        case(
            "login invalid JSON",
            request("POST", "/auth/login", "", json, Some(&b"{\"name\":"[..])),
            &[400],
        )
        .error("bad_request"),
        case(
            "login name a number",
            request(
                "POST",
                "/auth/login",
                "",
                json,
                Some(&br#"{"name":1,"password":"x"}"#[..]),
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "login form without password",
            request(
                "POST",
                "/auth/login",
                "",
                "Content-Type: application/x-www-form-urlencoded\r\n",
                Some(&b"name=alice"[..]),
            ),
            &[400],
        )
        .error("bad_request"),
        case(
            "login 5000-byte body",
            request(
                "POST",
                "/auth/login",
                "",
                json,
                Some(
                    format!("{{\"name\":\"{}\",\"password\":\"x\"}}", "a".repeat(5000)).as_bytes(),
                ),
            ),
            &[413],
        ),
        // A sign-in body that never arrives must not hold the connection
        // for ever (a slowloris on the one route open to all): timed out
        // (408), or at least closed.
        case(
            "login with a lying Content-Length",
            framed(
                "POST",
                "/auth/login",
                "",
                &format!("{json}Content-Length: 100\r\n"),
                b"{\"name\":",
            ),
            &[408, CLOSED],
        )
        .wait(25),
        // ---- Quota: alice has 13336 bytes left (less than --max-body).
        // Declared over it: 507 before the body (none is sent).
        case(
            "quota: declared",
            framed(
                "PUT",
                "/files/over-quota.bin",
                &alice,
                "Content-Length: 30000\r\n",
                b"",
            ),
            &[507],
        )
        .error("quota_exceeded"),
        case(
            "quota: declared POST",
            framed(
                "POST",
                "/files/over-quota.bin",
                &alice,
                "Content-Length: 30000\r\n",
                b"",
            ),
            &[507],
        )
        .error("quota_exceeded"),
        // Undeclared: cut off at the quota.
        case(
            "quota: chunked",
            framed(
                "PUT",
                "/files/over-quota.bin",
                &alice,
                "Transfer-Encoding: chunked\r\n",
                &chunked(&random_bytes(30_000), 4096),
            ),
            &[507],
        )
        .error("quota_exceeded"),
        // An upload that stalls: past the 10 s grace it is slower than
        // --min-body-rate, so 408 request_timeout and nothing stored.
        case(
            "upload that stalls",
            framed(
                "PUT",
                "/files/slow.bin",
                &alice,
                "Content-Length: 1000\r\n",
                b"0123456789",
            ),
            &[408],
        )
        .error("request_timeout")
        .wait(25),
        // ---- Share links: a token whose signature does not verify is
        // 403 bad_share, whatever was changed.
        case("share: garbage", get("/share/garbage", "", ""), &[403]).error("bad_share"),
        case(
            "share: tampered expiry",
            get(&format!("/share/{id}.1{expires}.{signature}"), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: tampered id",
            get(
                &format!("/share/{flipped_id}.{expires}.{signature}"),
                "",
                "",
            ),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: signature cut short",
            get(&format!("/share/{}", &share[..share.len() - 4]), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: extra part",
            get(&format!("/share/{share}.x"), "", ""),
            &[403],
        )
        .error("bad_share"),
        case(
            "share: 5000-char token",
            get(&format!("/share/{}", "a.".repeat(2500)), "", ""),
            &[403],
        )
        .error("bad_share"),
        // Not a share token at all: no such resource.
        case("share: empty token", get("/share/", "", ""), &[404]),
        // Not UTF-8 once decoded: axum's 400, or refused as tampered.
        case("share: %ff", get("/share/%ff", "", ""), &[400, 403]),
        case(
            "share: traversal after the token",
            get(&format!("/share/{share}/../../files/keep/a.txt"), "", ""),
            &[404, 400],
        ),
        case(
            "share: Range bytes=999999-",
            get(&format!("/share/{share}"), "", "Range: bytes=999999-\r\n"),
            &[416],
        )
        .error("range_not_satisfiable")
        .header("content-range", format!("bytes */{TEXT_SIZE}")),
        case(
            "share: PUT",
            put(&format!("/share/{share}"), "", "", b"x"),
            &[405],
        ),
        case(
            "share: DELETE without credentials",
            request("DELETE", &format!("/share/{share}"), "", "", None),
            &[401],
        )
        .error("unauthorized"),
        // Only the owner may revoke; to anyone else the link is not found.
        case(
            "share: DELETE by another user",
            request("DELETE", &format!("/share/{share}"), &root, "", None),
            &[404],
        )
        .error("not_found"),
        case(
            "share: DELETE garbage",
            request("DELETE", "/share/garbage", &alice, "", None),
            &[403],
        )
        .error("bad_share"),
        // ---- Wrong credentials: 401 with the same answer whether or not
        // the user exists. Nine failures in all (see above).
        case(
            "Bearer garbage",
            get("/files/keep/a.txt", &bearer("garbage"), ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "empty Bearer",
            get("/files/keep/a.txt", "Authorization: Bearer \r\n", ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "Basic not base64",
            get(
                "/files/keep/a.txt",
                "Authorization: Basic !!!not-base64!!!\r\n",
                "",
            ),
            &[401],
        )
        .error("unauthorized"),
        case(
            "Basic without colon",
            get("/files/keep/a.txt", &basic("alicepw-alice-123"), ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "Basic for a nonexistent user",
            get("/files/keep/a.txt", &basic("mallory:pw-alice-123"), ""),
            &[401],
        )
        .error("unauthorized")
        .header("www-authenticate", "Basic realm=\"wasm-storage\""),
        case(
            "Basic wrong password",
            get("/files/keep/a.txt", &basic("alice:pw-alice-124"), ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "wrong scheme",
            get(
                "/files/keep/a.txt",
                "Authorization: Digest username=\"alice\"\r\n",
                "",
            ),
            &[401],
        )
        .error("unauthorized"),
        case(
            "forged session cookie",
            get("/files/keep/a.txt", "Cookie: wst_session=forged\r\n", ""),
            &[401],
        )
        .error("unauthorized"),
        case(
            "login wrong password",
            request(
                "POST",
                "/auth/login",
                "",
                json,
                Some(&br#"{"name":"alice","password":"pw-alice-124"}"#[..]),
            ),
            &[401],
        )
        .error("unauthorized"),
    ]
}

/// Text helpers on raw requests.
trait RawRequest {
    fn replace_method(self, method: &str) -> Vec<u8>;
    fn replace_bytes(self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl RawRequest for Vec<u8> {
    /// The same request with another method (the first word).
    fn replace_method(self, method: &str) -> Vec<u8> {
        let space = self.iter().position(|&b| b == b' ').unwrap();
        [method.as_bytes(), &self[space..]].concat()
    }

    fn replace_bytes(self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        let mut rest = &self[..];
        while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(to);
            rest = &rest[at + from.len()..];
        }
        out.extend_from_slice(rest);
        out
    }
}

/// What came back for one request.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Bytes after the first complete response (a second answer).
    extra: usize,
    /// How the read ended: `eof`, `reset`, `timeout`.
    ended: &'static str,
}

/// Send the case's bytes on a fresh connection (writing and reading at
/// once, so a server that answers early and closes is still heard) and
/// read until the server closes.
async fn send(addr: SocketAddr, case: &Case) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let bytes = case.request.clone();
    let half_close = case.half_close;
    let writing = tokio::spawn(async move {
        // An early answer and close make the rest of the write fail: fine.
        let _ = writer.write_all(&bytes).await;
        if half_close {
            let _ = writer.shutdown().await;
        }
        // Kept until the answer is read: dropping it would half-close.
        writer
    });
    let mut received = Vec::new();
    let mut buffer = vec![0; 64 << 10];
    let deadline = tokio::time::Instant::now() + case.wait;
    let ended = loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buffer)).await {
            Err(_) => break "timeout",
            Ok(Ok(0)) => break "eof",
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
            Ok(Err(_)) => break "reset",
        }
    };
    writing.abort();
    let _ = writing.await;
    parse_answer(&received, ended)
}

fn parse_answer(received: &[u8], ended: &'static str) -> Answer {
    let empty = |status| Answer {
        status,
        headers: Vec::new(),
        body: Vec::new(),
        extra: 0,
        ended,
    };
    let Some(head_end) = find(received, b"\r\n\r\n") else {
        return empty(if ended == "timeout" {
            NO_ANSWER
        } else {
            CLOSED
        });
    };
    let head = String::from_utf8_lossy(&received[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(CLOSED);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let value = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let rest = &received[head_end + 4..];
    let (body, extra) = if status == 304 || status == 204 || (100..200).contains(&status) {
        (Vec::new(), rest.len())
    } else if value("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)
    } else if let Some(length) = value("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let length = length.min(rest.len());
        (rest[..length].to_vec(), rest.len() - length)
    } else {
        (rest.to_vec(), 0)
    };
    Answer {
        status,
        headers,
        body,
        extra,
        ended,
    }
}

/// A chunked body and how many bytes follow it.
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, usize) {
    let mut body = Vec::new();
    while let Some(line_end) = find(rest, b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailers (none expected), then the blank line.
            let end = find(rest, b"\r\n").map_or(rest.len(), |at| at + 2);
            return (body, rest.len() - end);
        }
        let size = size.min(rest.len());
        body.extend_from_slice(&rest[..size]);
        rest = &rest[(size + 2).min(rest.len())..];
    }
    (body, 0)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Why `answer` is wrong for `case`, if it is.
fn judge(case: &Case, answer: &Answer) -> Option<String> {
    let body = String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)]).into_owned();
    if !case.expect.contains(&answer.status) {
        return Some(format!(
            "got {} (read ended: {}), expected {:?}; body: {body:?}",
            answer.status, answer.ended, case.expect
        ));
    }
    if answer.extra > 0 {
        return Some(format!(
            "{} bytes followed the first response: the connection answered more than one request",
            answer.extra
        ));
    }
    if answer.status != case.expect[0] {
        return None;
    }
    if let Some(code) = case.error {
        let error = serde_json::from_slice::<serde_json::Value>(&answer.body)
            .ok()
            .and_then(|json| json["error"].as_str().map(str::to_owned));
        if error.as_deref() != Some(code) {
            return Some(format!(
                "status {} as expected, but error {error:?} instead of {code:?}; body: {body:?}",
                answer.status
            ));
        }
    }
    if let Some((name, contains)) = &case.header
        && !answer
            .headers
            .iter()
            .any(|(n, v)| n == name && v.contains(contains.as_str()))
    {
        return Some(format!(
            "status {} as expected, but no {name} header containing {contains:?}; headers: {:?}",
            answer.status, answer.headers
        ));
    }
    None
}

/// Send every case; the problems go to `failures`. Returns the count.
async fn run(
    server: &TestServer,
    phase: &str,
    cases: Vec<Case>,
    failures: &mut Vec<String>,
) -> usize {
    let names: BTreeSet<_> = cases.iter().map(|case| case.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique in {phase}");
    for case in &cases {
        let answer = send(server.addr, case).await;
        if case.expect.len() > 1 {
            println!(
                "[{phase}] {}: {} (read ended: {})",
                case.name, answer.status, answer.ended
            );
        }
        if let Some(problem) = judge(case, &answer) {
            let failure = format!("[{phase}] {}: {problem}", case.name);
            eprintln!("{failure}");
            failures.push(failure);
        }
    }
    cases.len()
}

/// What goes back into a URL from a listed folder path.
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'\\');

/// Every file in the tree `token` reaches (the open tree without one):
/// path -> sha256, by listing folders recursively.
async fn tree(server: &TestServer, token: Option<&str>) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut folders = vec![String::new()];
    while let Some(folder) = folders.pop() {
        let mut after: Option<String> = None;
        loop {
            let mut url = server.url(&format!(
                "/files/{}?limit=1000",
                utf8_percent_encode(&folder, PATH_ESCAPES)
            ));
            if let Some(after) = &after {
                url += &format!("&after={}", utf8_percent_encode(after, PATH_ESCAPES));
            }
            let mut listing = server.client.get(url);
            if let Some(token) = token {
                listing = listing.bearer_auth(token);
            }
            let response = listing.send().await.unwrap();
            assert_eq!(response.status(), 200, "listing {folder:?}");
            let page: serde_json::Value = response.json().await.unwrap();
            for entry in page["entries"].as_array().unwrap() {
                let path = entry["path"].as_str().unwrap().to_owned();
                if entry["type"] == "folder" {
                    folders.push(path);
                } else {
                    files.insert(path, entry["sha256"].as_str().unwrap().to_owned());
                }
            }
            match page["next_after"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
        }
    }
    files
}

/// Store `content` at `path` in the tree `token` reaches; remember its digest.
async fn store(
    server: &TestServer,
    token: Option<&str>,
    path: &str,
    content: Vec<u8>,
    expected: &mut BTreeMap<String, String>,
) {
    let digest = sha256_hex(&content);
    let mut request = server
        .client
        .put(server.url(&format!("/files/{path}")))
        .body(content);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 201, "storing {path}");
    expected.insert(path.to_owned(), digest);
}

/// The estimator settings a hostile PUT could change.
async fn estimator_settings(
    server: &TestServer,
    token: Option<&str>,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut request = server.client.get(server.url("/admin/estimator"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let report: serde_json::Value = request.send().await.unwrap().json().await.unwrap();
    [
        "mode",
        "method",
        "alpha",
        "restart_budget",
        "fixed_threshold_bytes",
    ]
    .into_iter()
    .map(|name| (name, report[name].clone()))
    .collect()
}

/// Sign in; the session cookie and its CSRF token.
async fn login(server: &TestServer, name: &str, password: &str) -> (String, String) {
    let response = server
        .client
        .post(server.url("/auth/login"))
        .json(&serde_json::json!({ "name": name, "password": password }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "signing in as {name}");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .strip_prefix("wst_session=")
        .unwrap()
        .to_owned();
    let body: serde_json::Value = response.json().await.unwrap();
    (cookie, body["csrf"].as_str().unwrap().to_owned())
}

/// Record how `got` differs from `want` (the test goes on, so that one
/// run shows every problem).
fn same<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &BTreeMap<K, V>,
    want: &BTreeMap<K, V>,
    failures: &mut Vec<String>,
) {
    let mut differences = Vec::new();
    for (key, value) in got {
        match want.get(key) {
            None => differences.push(format!("unexpected {key:?} = {value:?}")),
            Some(wanted) if wanted != value => {
                differences.push(format!("{key:?} is {value:?}, not {wanted:?}"));
            }
            Some(_) => {}
        }
    }
    for key in want.keys().filter(|key| !got.contains_key(key)) {
        differences.push(format!("missing {key:?}"));
    }
    if !differences.is_empty() {
        let failure = format!("[after] {what}: {}", differences.join("; "));
        eprintln!("{failure}");
        failures.push(failure);
    }
}

/// A set as a map, for [`same`].
fn as_map<T: Ord>(set: BTreeSet<T>) -> BTreeMap<T, ()> {
    set.into_iter().map(|item| (item, ())).collect()
}

/// Poll `current` for a few seconds (a failed upload's temp file is removed
/// as its request ends, not necessarily before the answer is sent).
async fn settles<T: PartialEq + std::fmt::Debug>(
    mut current: impl FnMut() -> T,
    expected: &T,
) -> T {
    for _ in 0..50 {
        let now = current();
        if &now == expected {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    current()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_the_right_status_and_write_nothing() {
    let server = TestServer::start(|config| {
        config.max_body = gateway::config::ByteSize(MAX_BODY);
        config.header_timeout = Duration::from_secs(2);
    })
    .await;
    let mut failures = Vec::new();

    // ---- Open mode: what the test stores on purpose, then the table.
    let mut open = BTreeMap::new();
    let text: Vec<u8> = (0..TEXT_SIZE).map(|i| b'a' + (i % 26) as u8).collect();
    let open_text_sha = sha256_hex(&text);
    store(&server, None, "keep/a.txt", text, &mut open).await;
    store(&server, None, "keep/b.bin", random_bytes(10_240), &mut open).await;
    let settings = estimator_settings(&server, None).await;
    let open_count = run(
        &server,
        "open",
        table(Mode::Open, "", "", &open_text_sha),
        &mut failures,
    )
    .await;
    same(
        "the open tree",
        &tree(&server, None).await,
        &open,
        &mut failures,
    );
    same(
        "the estimator settings (open)",
        &estimator_settings(&server, None).await,
        &settings,
        &mut failures,
    );

    // ---- Users: alice fills her quota to 13336 bytes short of 1 MiB.
    server
        .add_user("alice", "pw-alice-123", false, Some(QUOTA))
        .await;
    server.add_user("root", "pw-root-123", true, None).await;
    // "Does any user exist" is cached for a second.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let alice_token = server.create_token("alice").await;
    let root_token = server.create_token("root").await;
    let mut alice_files = BTreeMap::new();
    let alice_text: Vec<u8> = (0..TEXT_SIZE).map(|i| b'A' + (i % 26) as u8).collect();
    let alice_text_sha = sha256_hex(&alice_text);
    let alice_tok = Some(alice_token.as_str());
    store(
        &server,
        alice_tok,
        "keep/a.txt",
        alice_text.clone(),
        &mut alice_files,
    )
    .await;
    store(
        &server,
        alice_tok,
        "keep/b.bin",
        random_bytes(10_240),
        &mut alice_files,
    )
    .await;
    for i in 0..16 {
        let path = format!("fill/{i:02}");
        store(
            &server,
            alice_tok,
            &path,
            random_bytes(64_000),
            &mut alice_files,
        )
        .await;
    }
    let mut root_files = BTreeMap::new();
    store(
        &server,
        Some(&root_token),
        "root-only.txt",
        random_bytes(2000),
        &mut root_files,
    )
    .await;
    let shared: serde_json::Value = server
        .client
        .post(server.url("/files/keep/a.txt?share"))
        .bearer_auth(&alice_token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let share = shared["token"].as_str().unwrap().to_owned();
    let (alice_cookie, alice_csrf) = login(&server, "alice", "pw-alice-123").await;
    let (root_cookie, root_csrf) = login(&server, "root", "pw-root-123").await;
    let settings = estimator_settings(&server, Some(&root_token)).await;

    let users_count = run(
        &server,
        "users",
        table(
            Mode::Users,
            &bearer(&alice_token),
            &bearer(&root_token),
            &alice_text_sha,
        ),
        &mut failures,
    )
    .await;
    let accounts = Accounts {
        alice: alice_token.clone(),
        root: root_token.clone(),
        alice_cookie: alice_cookie.clone(),
        alice_csrf,
        root_cookie,
        root_csrf,
        share: share.clone(),
    };
    let accounts_count = run(&server, "accounts", account_cases(&accounts), &mut failures).await;
    let count = open_count + users_count + accounts_count;
    println!(
        "bad input: {count} cases ({open_count} open, {users_count} with users, {accounts_count} about accounts)"
    );

    // ---- Nothing written: every tree is what the test stored, the share
    // and the session survive, the settings are unchanged.
    same(
        "alice's tree",
        &tree(&server, alice_tok).await,
        &alice_files,
        &mut failures,
    );
    same(
        "root's tree",
        &tree(&server, Some(&root_token)).await,
        &root_files,
        &mut failures,
    );
    same(
        "the estimator settings (users)",
        &estimator_settings(&server, Some(&root_token)).await,
        &settings,
        &mut failures,
    );
    let via_share = server
        .client
        .get(server.url(&format!("/share/{share}")))
        .send()
        .await
        .unwrap();
    assert_eq!(via_share.status(), 200, "the share link still works");
    assert_eq!(via_share.bytes().await.unwrap(), alice_text);
    let session = server
        .client
        .get(server.url("/auth/session"))
        .header("cookie", format!("wst_session={alice_cookie}"))
        .send()
        .await
        .unwrap();
    assert_eq!(session.status(), 200, "alice's session survived");

    // Exactly the blobs of those files, and no temp file left.
    let wanted: BTreeSet<String> = open
        .values()
        .chain(alice_files.values())
        .chain(root_files.values())
        .cloned()
        .collect();
    let blob_names = || -> BTreeSet<String> {
        blob_files(&server.data_dir)
            .iter()
            .map(|blob| blob.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    same(
        "the blob files",
        &as_map(settles(blob_names, &wanted).await),
        &as_map(wanted),
        &mut failures,
    );
    let temp_files = || -> BTreeSet<String> {
        std::fs::read_dir(server.data_dir.join("tmp"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    };
    same(
        "the temp files",
        &as_map(settles(temp_files, &BTreeSet::new()).await),
        &BTreeMap::new(),
        &mut failures,
    );

    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    server.stop().await;
}
