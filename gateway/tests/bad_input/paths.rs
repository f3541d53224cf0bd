//! Request targets: the file paths the files API refuses (400
//! `bad_path`, decided before a byte of any body is read), the names it
//! keeps exact, and the targets hyper refuses before the application.

use crate::support::{Area, Case, Phase, case, get, put, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_paths_are_refused_and_write_nothing() {
    Area {
        name: "paths",
        both: cases,
        accounts: |_| Vec::new(),
    }
    .check()
    .await;
}

/// In both modes: `p.user` is the credential line.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    let long_path = vec!["d".repeat(99); 20].join("/");
    assert_eq!(long_path.len(), 1999);
    vec![
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
        case(
            "PUT %ff (not UTF-8)",
            put("/files/%ff.txt", u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
        case("PUT %5C", put("/files/a%5Cb", u, "", b"x"), &[400]).error("bad_path"),
        // A raw backslash: hyper refuses the target (400, no JSON) or the
        // path check does (400 bad_path); either is 400.
        case(
            "GET raw backslash",
            get("/files/keep\\a.txt", u, ""),
            &[400],
        ),
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
        case(
            "GET folder with dot",
            get("/files/keep./a.txt", u, ""),
            &[404],
        )
        .error("not_found"),
        case("GET other case", get("/files/KEEP/A.TXT", u, ""), &[404]).error("not_found"),
        case(
            "GET trailing %20",
            get("/files/keep/a.txt%20", u, ""),
            &[404],
        )
        .error("not_found"),
        case("PUT folder path", put("/files/keep/", u, "", b"x"), &[400]).error("bad_request"),
        case(
            "POST folder path",
            request("POST", "/files/keep/", u, "", Some(&b"x"[..])),
            &[400],
        )
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
        case(
            "PUT trailing %2",
            put("/files/trunc%2", u, "", b"x"),
            &[400],
        )
        .error("bad_path"),
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
    ]
}
