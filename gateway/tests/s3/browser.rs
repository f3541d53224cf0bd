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

/// The browser suite against `server` as the key's owner.
async fn browser_suite(server: &S3TestServer, key: &(String, String)) {
    let mut command = clean(&python());
    command
        .arg(script("browser_suite.py"))
        .args(["--endpoint", &server.endpoint()])
        .args(["--access-key", &key.0])
        .arg(format!("--secret={}", key.1));
    let output = run(command, Duration::from_secs(600)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the browser suite failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("all passed"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_suite_passes_on_sqlite() {
    within(Duration::from_secs(600), async {
        let (server, key) = with_alice().await;
        browser_suite(&server, &key).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_suite_passes_on_postgres_and_seaweedfs() {
    within(Duration::from_secs(900), async {
        let (server, key, _backend) = on_postgres_and_seaweedfs("browser").await;
        browser_suite(&server, &key).await;
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
