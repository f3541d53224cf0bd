//! Object lock and lifecycle held to real clients on both backends: the
//! object lock suite (`object_lock_suite.py`: boto3, S3's rules and error
//! codes) and the lifecycle suite (`lifecycle_suite.py`, its time-based
//! cases on the gateway's test clock, a "day" of two seconds) on SQLite
//! and on PostgreSQL with blobs in SeaweedFS, `/metrics` counting what the
//! lifecycle did; the AWS CLI and `mc` (`retention`, `legalhold`) setting
//! locks; and every other way to destroy a locked version refused or
//! turned into a delete marker: a REST and a WebDAV delete, an overwrite,
//! the trash's delete-forever, a WebDAV move, the user's removal, while
//! the locked bytes still read back by version id.

use super::versions::mc;
use super::*;

/// How long a lifecycle day lasts on the gateways of these tests.
const TEST_DAY: Duration = Duration::from_secs(2);

/// Both suites, then what `/metrics` says the lifecycle did.
async fn both_suites(server: &S3TestServer, key: &(String, String)) {
    python_suite(server, key, "object_lock_suite.py", &[]).await;
    let day = TEST_DAY.as_secs().to_string();
    python_suite(server, key, "lifecycle_suite.py", &["--day-seconds", &day]).await;
    for action in ["expired", "noncurrent_removed", "uploads_aborted", "held"] {
        let sample = format!("wasm_storage_lifecycle_actions_total{{action=\"{action}\"}}");
        assert!(metric(server, &sample).await >= 1, "{sample}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_lock_and_lifecycle_suites_pass_on_sqlite() {
    within(Duration::from_secs(900), async {
        let server = S3TestServer::start(|config| config.lifecycle_test_day = Some(TEST_DAY)).await;
        server.server.add_user("alice", PASSWORD, false, None).await;
        let key = key_create(&server, Some("alice"), "tests").await;
        both_suites(&server, &key).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_lock_and_lifecycle_suites_pass_on_postgres_and_seaweedfs() {
    within(Duration::from_secs(900), async {
        let (server, key, _backend) = on_postgres_and_seaweedfs_with("object-lock", |config| {
            config.lifecycle_test_day = Some(TEST_DAY);
        })
        .await;
        both_suites(&server, &key).await;
    })
    .await;
}

/// A request as alice on the REST port: its status and body.
async fn as_alice(server: &S3TestServer, method: &str, path: &str, body: &str) -> (u16, String) {
    let response = server
        .server
        .client
        .request(
            reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
            server.server.url(path),
        )
        .header("authorization", basic("alice"))
        .header("destination", server.server.url("/dav/vault/moved.txt"))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_set_locks_and_no_protocol_destroys_a_locked_version() {
    within(Duration::from_secs(600), async {
        let (server, key) = with_alice().await;
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        // The AWS CLI makes a locked bucket with a default retention.
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "create-bucket",
                "--bucket",
                "vault",
                "--object-lock-enabled-for-bucket",
            ],
        )
        .await;
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "put-object-lock-configuration",
                "--bucket",
                "vault",
                "--object-lock-configuration",
                r#"{"ObjectLockEnabled":"Enabled","Rule":{"DefaultRetention":{"Mode":"GOVERNANCE","Days":1}}}"#,
            ],
        )
        .await;
        let file = dir.join("backup.tar");
        std::fs::write(&file, "the only copy").unwrap();
        let put = aws_json(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "put-object",
                "--bucket",
                "vault",
                "--key",
                "backup.tar",
                "--body",
                file.to_str().unwrap(),
            ],
        )
        .await;
        let version = put["VersionId"].as_str().unwrap().to_owned();
        let retention = aws_json(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "get-object-retention",
                "--bucket",
                "vault",
                "--key",
                "backup.tar",
            ],
        )
        .await;
        assert_eq!(retention["Retention"]["Mode"], "GOVERNANCE", "{retention}");
        let mut refused = aws(&server, &key, dir);
        refused.args([
            "s3api",
            "delete-object",
            "--bucket",
            "vault",
            "--key",
            "backup.tar",
            "--version-id",
            &version,
        ]);
        let output = run(refused, Duration::from_secs(60)).await;
        assert!(!output.status.success());
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("AccessDenied"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );

        // mc: governance made compliance (which takes a bypass), a few days
        // long, and a legal hold.
        let mut refused = clean(&tool("mc"));
        refused
            .env(
                "MC_HOST_gw",
                format!(
                    "http://{}:{}@{}",
                    key.0,
                    key.1,
                    server.endpoint().trim_start_matches("http://")
                ),
            )
            .arg("--config-dir")
            .arg(dir.join("mc"))
            .args(["retention", "set", "COMPLIANCE", "3d", "gw/vault/backup.tar"]);
        let output = run(refused, Duration::from_secs(60)).await;
        assert!(!output.status.success(), "governance yields only to a bypass");
        mc(
            &server,
            &key,
            dir,
            &[
                "retention",
                "set",
                "--bypass",
                "COMPLIANCE",
                "3d",
                "gw/vault/backup.tar",
            ],
        )
        .await;
        let info = mc(&server, &key, dir, &["retention", "info", "gw/vault/backup.tar"]).await;
        assert!(info.contains("COMPLIANCE"), "{info}");
        mc(&server, &key, dir, &["legalhold", "set", "gw/vault/backup.tar"]).await;
        let info = mc(&server, &key, dir, &["legalhold", "info", "gw/vault/backup.tar"]).await;
        assert!(info.contains("ON"), "{info}");

        // REST and WebDAV: a delete and an overwrite make versions; the
        // trash cannot purge it, a move cannot take it, nor can removing
        // the user.
        let (status, body) = as_alice(&server, "PUT", "/files/vault/backup.tar", "newer").await;
        assert!((200..300).contains(&status), "{status} {body}");
        let (status, _) = as_alice(&server, "DELETE", "/files/vault/backup.tar", "").await;
        assert_eq!(status, 204);
        let (status, trash) = as_alice(&server, "GET", "/trash", "").await;
        assert_eq!(status, 200, "{trash}");
        let trash: serde_json::Value = serde_json::from_str(&trash).unwrap();
        let id = trash["items"][0]["id"].as_i64().unwrap();
        let (status, body) = as_alice(&server, "DELETE", &format!("/trash/{id}"), "").await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains("object_locked") && body.contains("retained"), "{body}");
        let (status, body) = as_alice(&server, "DELETE", "/trash", "").await;
        assert_eq!((status, body.contains("\"removed\":0")), (200, true), "{body}");
        assert_eq!(
            as_alice(&server, "POST", &format!("/trash/{id}/restore"), "")
                .await
                .0,
            200
        );
        let (status, body) = as_alice(&server, "MOVE", "/dav/vault/backup.tar", "").await;
        assert_eq!(status, 403, "{body}");
        assert_eq!(
            as_alice(&server, "DELETE", "/dav/vault/backup.tar", "")
                .await
                .0,
            204
        );
        let mut remove = gateway_cli(&server);
        remove.args(["user", "remove", "alice"]);
        let output = run(remove, Duration::from_secs(60)).await;
        assert!(!output.status.success());
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("object lock"),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );

        // The locked bytes read back by version id, after all of that.
        let got = dir.join("got");
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "vault",
                "--key",
                "backup.tar",
                "--version-id",
                &version,
                got.to_str().unwrap(),
            ],
        )
        .await;
        assert_eq!(std::fs::read_to_string(&got).unwrap(), "the only copy");
        server.stop().await;
    })
    .await;
}
