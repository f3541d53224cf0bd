//! Who is asking: no credentials, wrong ones (tokens, Basic, cookies),
//! the session cookie's CSRF token, and sign-in requests refused before
//! any password check.
//!
//! At most 9 of these cases present wrong credentials: the 11th failure in
//! a minute from one address would lock the test itself out (429) for the
//! checks that follow.

use crate::support::{
    Accounts, Area, CLOSED, Case, admin_json, basic, bearer, case, framed, get, put, request,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_credentials_and_sessions_are_refused() {
    Area {
        name: "auth",
        both: |_| Vec::new(),
        accounts: account_cases,
    }
    .check()
    .await;
}

/// With users: alice's and root's sessions (their cookies and CSRF tokens).
fn account_cases(a: &Accounts) -> Vec<Case> {
    let alice_cookie = format!("Cookie: wst_session={}\r\n", a.alice_cookie);
    let root_cookie = format!("Cookie: wst_session={}\r\n", a.root_cookie);
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
