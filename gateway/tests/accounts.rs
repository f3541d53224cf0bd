//! Accounts through real HTTP: credentials (tokens, Basic, the session
//! cookie and its CSRF token), per-user trees, admin rights, quotas, share
//! links, failed attempts per address, and the refusal to serve openly off
//! loopback. The `gateway user`/`token` commands run as real processes.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use common::{TestServer, random_bytes, sha256_hex, stored_blobs};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, COOKIE, SET_COOKIE, WWW_AUTHENTICATE};
use serde_json::{Value, json};

const ALICE_PASSWORD: &str = "alice's long password";
const BOB_PASSWORD: &str = "bob's long password";

/// A server with alice (1 MiB quota), bob, and root (admin); their tokens.
async fn with_users() -> (TestServer, String, String, String) {
    let server = TestServer::start(|_| {}).await;
    server
        .add_user("alice", ALICE_PASSWORD, false, Some(1 << 20))
        .await;
    server.add_user("bob", BOB_PASSWORD, false, None).await;
    server
        .add_user("root", "root's long password", true, None)
        .await;
    let alice = server.create_token("alice").await;
    let bob = server.create_token("bob").await;
    let root = server.create_token("root").await;
    (server, alice, bob, root)
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn basic(name: &str, secret: &str) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{secret}"));
    format!("Basic {encoded}")
}

async fn send(
    server: &TestServer,
    method: reqwest::Method,
    path: &str,
    authorization: Option<&str>,
    body: Option<Vec<u8>>,
) -> reqwest::Response {
    let mut request = server.client.request(method, server.url(path));
    if let Some(authorization) = authorization {
        request = request.header(AUTHORIZATION, authorization);
    }
    if let Some(body) = body {
        request = request.body(body);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn without_credentials_every_data_request_is_refused_alike() {
    let (server, alice, _, _) = with_users().await;
    for (method, path) in [
        (reqwest::Method::GET, "/files/"),
        (reqwest::Method::GET, "/files/a.txt"),
        (reqwest::Method::PUT, "/files/a.txt"),
        (reqwest::Method::DELETE, "/files/a.txt"),
        (reqwest::Method::GET, "/admin/pool"),
        (reqwest::Method::GET, "/auth/session"),
    ] {
        let response = send(&server, method.clone(), path, None, None).await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
        let challenges: Vec<_> = response
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .map(|value| value.to_str().unwrap().to_owned())
            .collect();
        assert!(challenges.iter().any(|c| c.starts_with("Bearer")));
        assert!(challenges.iter().any(|c| c.starts_with("Basic")));
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"], "unauthorized");
    }
    // Monitoring and the page stay open.
    for path in ["/healthz", "/metrics", "/"] {
        let response = send(&server, reqwest::Method::GET, path, None, None).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    // A wrong password and an unknown user get the very same answer.
    let wrong = send(
        &server,
        reqwest::Method::GET,
        "/files/",
        Some(&basic("alice", "not her password")),
        None,
    )
    .await;
    let unknown = send(
        &server,
        reqwest::Method::GET,
        "/files/",
        Some(&basic("mallory", "not her password")),
        None,
    )
    .await;
    assert_eq!(wrong.status(), unknown.status());
    assert_eq!(wrong.text().await.unwrap(), unknown.text().await.unwrap());
    // The right ones work, by token and by Basic (password or token).
    for authorization in [
        bearer(&alice),
        basic("alice", ALICE_PASSWORD),
        basic("alice", &alice),
    ] {
        let response = send(
            &server,
            reqwest::Method::GET,
            "/files/",
            Some(&authorization),
            None,
        )
        .await;
        assert_eq!(response.status(), StatusCode::OK, "{authorization}");
    }
    // A token is its user's only: named for another user it fails.
    let response = send(
        &server,
        reqwest::Method::GET,
        "/files/",
        Some(&basic("bob", &alice)),
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // A page's fetch gets no Basic challenge (no browser login box).
    let response = server
        .client
        .get(server.url("/files/"))
        .header("sec-fetch-mode", "cors")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers().get_all(WWW_AUTHENTICATE).iter().count(),
        1
    );
    server.stop().await;
}

#[tokio::test]
async fn each_user_has_their_own_tree() {
    let (server, alice, bob, _) = with_users().await;
    let (alice, bob) = (bearer(&alice), bearer(&bob));
    let put = |auth: String, path: &'static str, body: &'static [u8]| {
        let request = server
            .client
            .put(server.url(&format!("/files/{path}")))
            .header(AUTHORIZATION, auth)
            .body(body);
        async move { request.send().await.unwrap() }
    };
    assert_eq!(
        put(alice.clone(), "a.txt", b"alice").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        put(alice.clone(), "docs/x.txt", b"x").await.status(),
        StatusCode::CREATED
    );
    // bob's a.txt is another file: created, not replaced.
    assert_eq!(
        put(bob.clone(), "a.txt", b"bob").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        read(&server, &alice, "/files/a.txt")
            .await
            .text()
            .await
            .unwrap(),
        "alice"
    );
    assert_eq!(
        read(&server, &bob, "/files/a.txt")
            .await
            .text()
            .await
            .unwrap(),
        "bob"
    );
    // bob can neither see, read nor delete alice's docs/x.txt.
    assert_eq!(
        read(&server, &bob, "/files/docs/x.txt").await.status(),
        StatusCode::NOT_FOUND
    );
    let listing: Value = read(&server, &bob, "/files/").await.json().await.unwrap();
    let names: Vec<_> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a.txt"]);
    // Its 3 bytes and an entry's overhead (1 KiB, `volume::ENTRY_OVERHEAD`).
    assert_eq!(listing["usage"]["used"], 3 + 1024);
    assert_eq!(listing["usage"]["quota"], Value::Null);
    let deleted = send(
        &server,
        reqwest::Method::DELETE,
        "/files/docs/x.txt",
        Some(&bob),
        None,
    )
    .await;
    assert_eq!(deleted.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        read(&server, &alice, "/files/docs/x.txt")
            .await
            .text()
            .await
            .unwrap(),
        "x"
    );
    let meta: Value = read(&server, &alice, "/files/a.txt?meta")
        .await
        .json()
        .await
        .unwrap();
    // Two files: 6 bytes, and an entry's overhead for each.
    assert_eq!(
        meta["usage"],
        json!({ "used": 6 + 2 * 1024, "quota": 1 << 20 })
    );
    server.stop().await;
}

#[tokio::test]
async fn admin_routes_need_an_admin() {
    let (server, alice, _, root) = with_users().await;
    let change = json!({ "mode": "monitor" });
    for (token, pool_status, change_status) in [
        (&alice, StatusCode::FORBIDDEN, StatusCode::FORBIDDEN),
        (&root, StatusCode::OK, StatusCode::OK),
    ] {
        let pool = send(
            &server,
            reqwest::Method::GET,
            "/admin/pool",
            Some(&bearer(token)),
            None,
        )
        .await;
        assert_eq!(pool.status(), pool_status);
        let changed = server
            .client
            .put(server.url("/admin/estimator"))
            .header(AUTHORIZATION, bearer(token))
            .json(&change)
            .send()
            .await
            .unwrap();
        assert_eq!(changed.status(), change_status);
        if change_status == StatusCode::FORBIDDEN {
            let body: Value = changed.json().await.unwrap();
            assert_eq!(body["error"], "forbidden");
        }
    }
    let report: Value = send(
        &server,
        reqwest::Method::GET,
        "/admin/estimator",
        Some(&bearer(&root)),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(report["mode"], "monitor");
    server.stop().await;
}

#[tokio::test]
async fn a_quota_stops_an_upload_with_nothing_stored() {
    let (server, alice, _, _) = with_users().await;
    let alice = bearer(&alice);
    let first = random_bytes(700 << 10);
    let response = send(
        &server,
        reqwest::Method::PUT,
        "/files/first",
        Some(&alice),
        Some(first.clone()),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let blobs_before = stored_blobs(&server.data_dir);
    // Declared: refused before a byte is read.
    let response = send(
        &server,
        reqwest::Method::PUT,
        "/files/second",
        Some(&alice),
        Some(random_bytes(400 << 10)),
    )
    .await;
    assert_eq!(response.status(), StatusCode::INSUFFICIENT_STORAGE);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"], "quota_exceeded");
    // Undeclared (chunked): cut off at the quota.
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        (0..8).map(|_| Ok(random_bytes(64 << 10))).collect();
    let response = server
        .client
        .put(server.url("/files/third"))
        .header(AUTHORIZATION, &alice)
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::INSUFFICIENT_STORAGE);
    for path in ["/files/second", "/files/third"] {
        let response = send(&server, reqwest::Method::GET, path, Some(&alice), None).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }
    assert_eq!(stored_blobs(&server.data_dir), blobs_before);
    assert_eq!(
        std::fs::read_dir(server.data_dir.join("tmp"))
            .unwrap()
            .count(),
        0
    );
    // Replacing the file within the quota is fine: its old size is freed
    // (the quota less the file's entry overhead, 1 KiB).
    let replacement = random_bytes((1 << 20) - 1024);
    let response = send(
        &server,
        reqwest::Method::PUT,
        "/files/first",
        Some(&alice),
        Some(replacement),
    )
    .await;
    assert_eq!(response.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn share_links_work_anonymously_until_expired_or_revoked() {
    let (server, alice, bob, _) = with_users().await;
    let alice = bearer(&alice);
    let content = random_bytes(10_000);
    send(
        &server,
        reqwest::Method::PUT,
        "/files/shared.bin",
        Some(&alice),
        Some(content.clone()),
    )
    .await;
    send(
        &server,
        reqwest::Method::PUT,
        "/files/private.bin",
        Some(&alice),
        Some(b"private".to_vec()),
    )
    .await;
    let shared: Value = send(
        &server,
        reqwest::Method::POST,
        "/files/shared.bin?share",
        Some(&alice),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    let url = shared["url"].as_str().unwrap().to_owned();
    let token = shared["token"].as_str().unwrap().to_owned();
    assert_eq!(url, server.url(&format!("/share/{token}")));
    let anonymous = server.client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::OK);
    let etag = anonymous.headers()["etag"].to_str().unwrap().to_owned();
    assert_eq!(etag, format!("\"{}\"", sha256_hex(&content)));
    assert_eq!(anonymous.bytes().await.unwrap(), content);
    let ranged = server
        .client
        .get(&url)
        .header("range", "bytes=0-9")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(ranged.bytes().await.unwrap(), content[..10]);
    // Tampered: another id, another expiry, another signature.
    let (id, rest) = token.split_once('.').unwrap();
    let (expiry, signature) = rest.split_once('.').unwrap();
    let mut other_id = id.to_owned();
    other_id.replace_range(0..1, if id.starts_with('A') { "B" } else { "A" });
    for tampered in [
        format!("{other_id}.{expiry}.{signature}"),
        format!("{id}.9999999999999.{signature}"),
        format!(
            "{id}.{expiry}.{}",
            signature.chars().rev().collect::<String>()
        ),
        format!("{id}.{expiry}"),
    ] {
        let response = server
            .client
            .get(server.url(&format!("/share/{tampered}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{tampered}");
    }
    // A link to a missing file is refused.
    let response = send(
        &server,
        reqwest::Method::POST,
        "/files/nothing?share",
        Some(&alice),
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // Expired.
    let short: Value = send(
        &server,
        reqwest::Method::POST,
        "/files/private.bin?share&expires=1",
        Some(&alice),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    assert!(short["expires"].is_string());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let response = server
        .client
        .get(short["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // Revoked: only by its owner.
    let by_bob = send(
        &server,
        reqwest::Method::DELETE,
        &format!("/share/{token}"),
        Some(&bearer(&bob)),
        None,
    )
    .await;
    assert_eq!(by_bob.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        server.client.get(&url).send().await.unwrap().status(),
        StatusCode::OK
    );
    let by_alice = send(
        &server,
        reqwest::Method::DELETE,
        &format!("/share/{token}"),
        Some(&alice),
        None,
    )
    .await;
    assert_eq!(by_alice.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        server.client.get(&url).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
    server.stop().await;
}

#[tokio::test]
async fn sessions_set_safe_cookies_and_need_the_csrf_token() {
    let (server, _, _, _) = with_users().await;
    let login = server
        .client
        .post(server.url("/auth/login"))
        .header("x-forwarded-proto", "https")
        .json(&json!({ "name": "bob", "password": BOB_PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    let set_cookie = login.headers()[SET_COOKIE].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Secure", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let session: Value = login.json().await.unwrap();
    let csrf = session["csrf"].as_str().unwrap().to_owned();
    // Reading needs only the cookie.
    let listing = server
        .client
        .get(server.url("/files/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(listing.status(), StatusCode::OK);
    // Writing needs the CSRF token too.
    let forged = server
        .client
        .put(server.url("/files/x"))
        .header(COOKIE, &cookie)
        .body("forged")
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    let body: Value = forged.json().await.unwrap();
    assert_eq!(body["error"], "csrf");
    let written = server
        .client
        .put(server.url("/files/x"))
        .header(COOKIE, &cookie)
        .header("x-csrf-token", &csrf)
        .body("mine")
        .send()
        .await
        .unwrap();
    assert_eq!(written.status(), StatusCode::CREATED);
    // A sign-in from another site's page is refused.
    let cross_site = server
        .client
        .post(server.url("/auth/login"))
        .header("origin", "https://evil.example")
        .json(&json!({ "name": "bob", "password": BOB_PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), StatusCode::FORBIDDEN);
    // Sign out ends the session.
    let out = server
        .client
        .post(server.url("/auth/logout"))
        .header(COOKIE, &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let after = server
        .client
        .get(server.url("/files/"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
    server.stop().await;
}

#[tokio::test]
async fn password_attempts_are_limited_per_address() {
    let (server, alice, _, _) = with_users().await;
    // Attempts count as they begin: ten at once use them all up.
    let guesses: Vec<_> = (0..10)
        .map(|n| {
            let request = server
                .client
                .get(server.url("/files/"))
                .header(AUTHORIZATION, basic("alice", &format!("guess {n}")));
            async move { request.send().await.unwrap().status() }
        })
        .collect();
    for status in futures_util::future::join_all(guesses).await {
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let refused = send(
        &server,
        reqwest::Method::GET,
        "/files/",
        Some(&basic("alice", ALICE_PASSWORD)),
        None,
    )
    .await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(refused.headers().contains_key("retry-after"));
    // Tokens are 256 random bits, not guessable: they still work.
    let by_token = send(
        &server,
        reqwest::Method::GET,
        "/files/",
        Some(&bearer(&alice)),
        None,
    )
    .await;
    assert_eq!(by_token.status(), StatusCode::OK);
    server.stop().await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_attempts_count_per_client() {
    let server = TestServer::start(|config| {
        config.trusted_proxies = vec!["127.0.0.1".parse().unwrap()];
    })
    .await;
    server.add_user("alice", ALICE_PASSWORD, false, None).await;
    let guess = |client: &'static str| {
        server
            .client
            .get(server.url("/files/"))
            .header(AUTHORIZATION, basic("alice", "a guess"))
            .header("x-forwarded-for", client)
            .send()
    };
    for _ in 0..10 {
        assert_eq!(
            guess("203.0.113.1").await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        guess("203.0.113.1").await.unwrap().status(),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Another client behind the same proxy is not throttled.
    assert_eq!(
        guess("203.0.113.2").await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    server.stop().await;
}

#[tokio::test]
async fn stored_content_never_runs_on_this_origin() {
    let (server, alice, _, _) = with_users().await;
    let alice = bearer(&alice);
    let page = b"<html><script>fetch('/auth/session')</script></html>".to_vec();
    send(
        &server,
        reqwest::Method::PUT,
        "/files/x.html",
        Some(&alice),
        Some(page),
    )
    .await;
    let shared: Value = send(
        &server,
        reqwest::Method::POST,
        "/files/x.html?share",
        Some(&alice),
        None,
    )
    .await
    .json()
    .await
    .unwrap();
    for response in [
        send(
            &server,
            reqwest::Method::GET,
            "/files/x.html",
            Some(&alice),
            None,
        )
        .await,
        server
            .client
            .get(shared["url"].as_str().unwrap())
            .send()
            .await
            .unwrap(),
    ] {
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(
            headers["content-security-policy"],
            "sandbox; default-src 'none'"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["cache-control"], "private");
    }
    // A link dies with its file: the same path made again is another file.
    send(
        &server,
        reqwest::Method::DELETE,
        "/files/x.html",
        Some(&alice),
        None,
    )
    .await;
    send(
        &server,
        reqwest::Method::PUT,
        "/files/x.html",
        Some(&alice),
        Some(b"new".to_vec()),
    )
    .await;
    let response = server
        .client
        .get(shared["url"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // PUT stores whatever its query says; only POST makes links.
    let put = send(
        &server,
        reqwest::Method::PUT,
        "/files/y.txt?share",
        Some(&alice),
        Some(b"y".to_vec()),
    )
    .await;
    assert_eq!(put.status(), StatusCode::CREATED);
    server.stop().await;
}

#[tokio::test]
async fn other_sites_pages_cannot_write_or_reach_an_open_gateway() {
    let (server, alice, _, _) = with_users().await;
    // A cached Basic login or token rides along with another site's form.
    for (name, value) in [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let response = server
            .client
            .post(server.url("/files/evil.html"))
            .header(AUTHORIZATION, bearer(&alice))
            .header(name, value)
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{name}: {value}");
    }
    server.stop().await;
    // Without users, only requests addressed to a loopback name are served
    // (a page's own name resolving to 127.0.0.1 is DNS rebinding).
    let open = TestServer::start(|_| {}).await;
    for (host, status) in [
        ("localhost", StatusCode::OK),
        ("127.0.0.1:8080", StatusCode::OK),
        ("evil.example", StatusCode::FORBIDDEN),
    ] {
        let response = open
            .client
            .get(open.url("/files/"))
            .header("host", host)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{host}");
    }
    open.stop().await;
}

async fn read(server: &TestServer, authorization: &str, path: &str) -> reqwest::Response {
    send(
        server,
        reqwest::Method::GET,
        path,
        Some(authorization),
        None,
    )
    .await
}

/// Run a `gateway` command while a test server answers in this test's
/// runtime: off the runtime's one thread, so the server keeps running (a
/// group commit it holds open is settled) while the command waits for the
/// database. Blocking the thread instead let the command wait out SQLite's
/// busy timeout behind a write the server could not finish.
async fn beside_the_server<T: Send + 'static>(
    command: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> T {
    tokio::task::spawn_blocking(command).await.unwrap().unwrap()
}

fn gateway_command(data_dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gateway"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "warn");
    command
}

#[tokio::test]
async fn user_and_token_commands_manage_the_database_a_gateway_serves() {
    let dir = tempfile::tempdir().unwrap();
    // No user: refused anywhere but on loopback, naming the command.
    let refused = gateway_command(dir.path())
        .args(["--listen", "0.0.0.0:0", "--instances", "1"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("gateway user add NAME --admin"), "{stderr}");

    let mut add = gateway_command(dir.path())
        .args(["user", "add", "carol", "--admin", "--quota", "5MiB"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin
        .take()
        .unwrap()
        .write_all(b"carol's long password\n")
        .unwrap();
    assert!(add.wait().unwrap().success());
    let listed = gateway_command(dir.path())
        .args(["user", "list"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(listed.stdout).unwrap(),
        "carol admin quota=5MiB used=0\n"
    );
    let created = gateway_command(dir.path())
        .args(["token", "create", "carol", "--label", "ci"])
        .output()
        .unwrap();
    assert!(created.status.success());
    let token = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    assert!(token.starts_with("wst_"));

    let server = TestServer::start_in(dir.path(), |_| {}).await;
    let response = send(
        &server,
        reqwest::Method::PUT,
        "/files/c.txt",
        Some(&bearer(&token)),
        Some(b"c".to_vec()),
    )
    .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(
        send(&server, reqwest::Method::GET, "/files/c.txt", None, None)
            .await
            .status(),
        StatusCode::UNAUTHORIZED
    );
    let mut revoke = gateway_command(dir.path());
    revoke.args(["token", "revoke", &token]);
    let revoked = beside_the_server(move || revoke.output()).await;
    assert!(
        revoked.status.success(),
        "{}",
        String::from_utf8_lossy(&revoked.stderr)
    );
    let response = send(
        &server,
        reqwest::Method::GET,
        "/files/c.txt",
        Some(&bearer(&token)),
        None,
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    server.stop().await;
    let removed = gateway_command(dir.path())
        .args(["user", "remove", "carol"])
        .output()
        .unwrap();
    assert!(removed.status.success());
}

/// The open gateway remembers "no user" between requests (SQLite's
/// `data_version` says when to ask again), so a user added by another
/// process must close it for the very next request: no cache to outwait.
#[tokio::test]
async fn an_open_gateway_closes_the_moment_a_user_is_added() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    for round in 0..3 {
        let body = format!("open {round}").into_bytes();
        let stored = send(
            &server,
            reqwest::Method::PUT,
            "/files/open.txt",
            None,
            Some(body.clone()),
        )
        .await;
        assert!(stored.status().is_success(), "{}", stored.status());
        let read = send(&server, reqwest::Method::GET, "/files/open.txt", None, None).await;
        assert_eq!(read.status(), StatusCode::OK);
        assert_eq!(read.bytes().await.unwrap().as_ref(), body.as_slice());
    }

    let mut add = gateway_command(dir.path());
    add.args(["user", "add", "dave", "--admin"])
        .stdin(Stdio::piped());
    let added = beside_the_server(move || {
        let mut add = add.spawn()?;
        add.stdin
            .take()
            .expect("piped")
            .write_all(b"dave's long password\n")?;
        add.wait()
    })
    .await;
    assert!(added.success());

    // No pause: the first request after the command returns is refused.
    for method in [reqwest::Method::GET, reqwest::Method::HEAD] {
        let response = send(&server, method, "/files/open.txt", None, None).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    }
    let response = send(
        &server,
        reqwest::Method::PUT,
        "/files/open.txt",
        None,
        Some(b"after".to_vec()),
    )
    .await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let dave = basic("dave", "dave's long password");
    let read = send(
        &server,
        reqwest::Method::GET,
        "/files/open.txt",
        Some(&dave),
        None,
    )
    .await;
    assert_eq!(
        read.status(),
        StatusCode::NOT_FOUND,
        "dave's own tree is empty"
    );
    server.stop().await;
}
