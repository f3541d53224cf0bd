//! S3 for web apps, held to real clients on both backends: the browser
//! suite (`browser_suite.py`: boto3 and raw HTTP, CORS rules and
//! preflights, POST Object forms with signed policies, public-read
//! policies and anonymous reads, tagging, ACLs and S3's answers for the
//! configurations this store keeps none of) on SQLite and on PostgreSQL
//! with blobs in SeaweedFS; and `mc`: `stat` says a private bucket is not
//! anonymous, `anonymous set download` makes it so, and an unsigned `curl`
//! then reads an object, with the sandbox every file answer carries.

use super::versions::mc;
use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_suite_passes_on_sqlite() {
    within(Duration::from_secs(600), async {
        let (server, key) = with_alice().await;
        python_suite(&server, &key, "browser_suite.py", &[]).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_suite_passes_on_postgres_and_seaweedfs() {
    within(Duration::from_secs(900), async {
        let (server, key, _backend) = on_postgres_and_seaweedfs("browser").await;
        python_suite(&server, &key, "browser_suite.py", &[]).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mc_makes_a_bucket_anonymous_and_an_unsigned_read_gets_through() {
    within(Duration::from_secs(300), async {
        let (server, key) = with_alice().await;
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        mc(&server, &key, dir, &["mb", "gw/site"]).await;
        let file = dir.join("index.html");
        std::fs::write(&file, "<h1>public</h1>").unwrap();
        mc(
            &server,
            &key,
            dir,
            &["cp", file.to_str().unwrap(), "gw/site/index.html"],
        )
        .await;
        let anonymous_get = || async {
            let answer = reqwest::get(format!("{}/site/index.html", server.endpoint()))
                .await
                .unwrap();
            let status = answer.status().as_u16();
            let sandbox = answer
                .headers()
                .get("content-security-policy")
                .is_some_and(|csp| csp.to_str().unwrap_or("").contains("sandbox"));
            (status, sandbox, answer.text().await.unwrap())
        };
        let stat = mc(&server, &key, dir, &["stat", "gw/site"]).await;
        assert!(stat.contains("Anonymous: Disabled"), "{stat}");
        assert_eq!(anonymous_get().await.0, 403, "a private bucket");
        mc(
            &server,
            &key,
            dir,
            &["anonymous", "set", "download", "gw/site"],
        )
        .await;
        let stat = mc(&server, &key, dir, &["stat", "gw/site"]).await;
        assert!(stat.contains("Anonymous: Enabled"), "{stat}");
        let (status, sandbox, body) = anonymous_get().await;
        assert_eq!((status, body.as_str()), (200, "<h1>public</h1>"));
        assert!(sandbox, "a public read is sandboxed like every file answer");
        let put = reqwest::Client::new()
            .put(format!("{}/site/evil.html", server.endpoint()))
            .body("x")
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), 403, "anonymous writes stay refused");
        mc(&server, &key, dir, &["anonymous", "set", "none", "gw/site"]).await;
        assert_eq!(anonymous_get().await.0, 403, "private again");
    })
    .await;
}

/// A port whose next is free too (the refused origin's page).
fn two_free_ports() -> u16 {
    loop {
        let port = testsupport::free_port();
        if std::net::TcpListener::bind(("127.0.0.1", port + 1)).is_ok() {
            return port;
        }
    }
}

/// A page on another origin, in Chromium (`tests/browser/cross_origin.py`):
/// presigned PUT and GET through `fetch`, a presigned POST form (and one
/// its policy refuses), Uppy's AwsS3 plugin uploading in parts straight to
/// the S3 port, Uppy's tus plugin to `/uploads/` with a token (the gateway
/// allows the page's origin, `--cors-origins`), each read back exactly; a
/// page on an origin allowed nowhere is refused by the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_on_another_origin_uses_s3_and_tus_in_chromium() {
    within(Duration::from_secs(600), async {
        let page_port = two_free_ports();
        let server = S3TestServer::start(|config| {
            config.cors_origins = vec![format!("http://127.0.0.1:{page_port}")];
        })
        .await;
        server.server.add_user("alice", PASSWORD, false, None).await;
        let key = key_create(&server, Some("alice"), "tests").await;
        let token = server.server.create_token("alice").await;
        // Chromium's profile (where it keeps a large download's blob) on
        // a disk with room: a nearly full one fails the fetch.
        let scratch = common::roomy_dir(1 << 30).unwrap_or_else(|| tempfile::tempdir().unwrap());
        let mut command = clean(&python());
        command
            .env("TMPDIR", scratch.path())
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/cross_origin.py"))
            .args(["--s3", &server.endpoint()])
            .args(["--rest", server.server.url("").trim_end_matches('/')])
            .args(["--page-port", &page_port.to_string()])
            .args(["--access-key", &key.0])
            .arg(format!("--secret={}", key.1))
            .args(["--token", &token]);
        let output = run(command, Duration::from_secs(400)).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        println!("{stdout}");
        assert!(
            output.status.success(),
            "the cross-origin page failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("all passed"), "{stdout}");
        server.stop().await;
    })
    .await;
}
