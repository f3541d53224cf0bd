//! Methods: one a route lacks, one that is not a method, one that asks
//! for a tunnel.

use crate::support::{Area, Case, Phase, RawRequest as _, case, get, put, request};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_are_refused_and_write_nothing() {
    Area {
        name: "methods",
        both: cases,
        accounts: |_| Vec::new(),
    }
    .check()
    .await;
}

/// In both modes: `p.user` and `p.admin` are credential lines.
fn cases(p: &Phase<'_>) -> Vec<Case> {
    let u = p.user;
    let admin = p.admin;
    vec![
        // ---- Methods: axum answers 405 (with Allow) for a method a route
        // lacks; a method that is not a token is hyper's 400.
        case(
            "PATCH",
            request("PATCH", "/files/keep/a.txt", u, "", Some(&b"x"[..])),
            &[405],
        )
        .header("allow", "GET"),
        case(
            "TRACE",
            get("/files/keep/a.txt", u, "").replace_method("TRACE"),
            &[405],
        ),
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
            format!(
                "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n{u}Connection: close\r\n\r\n"
            ),
            &[405, 400, 404, 501],
        ),
        case(
            "FOOBAR",
            get("/files/keep/a.txt", u, "").replace_method("FOOBAR"),
            &[405],
        ),
        // Methods are case-sensitive: `get` is an unknown method, not GET.
        case(
            "lowercase get",
            get("/files/keep/a.txt", u, "").replace_method("get"),
            &[405],
        ),
        case(
            "method G(T",
            get("/files/keep/a.txt", u, "").replace_method("G(T"),
            &[400],
        ),
        case(
            "BREW /admin/pool",
            get("/admin/pool", admin, "").replace_method("BREW"),
            &[405],
        ),
        case(
            "DELETE /admin/estimator",
            request("DELETE", "/admin/estimator", admin, "", None),
            &[405],
        ),
        case("PUT /files/", put("/files/", u, "", b"x"), &[405]),
        case(
            "DELETE /files/",
            request("DELETE", "/files/", u, "", None),
            &[405],
        ),
    ]
}
