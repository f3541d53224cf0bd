//! Versions and the trash held to real clients on both backends: the
//! versioning suite (`versions_suite.py`: boto3, every corner of S3's
//! versioning from AWS's documentation) on SQLite and on PostgreSQL with
//! blobs in SeaweedFS; the AWS CLI (`s3api list-object-versions`,
//! `get-object --version-id`); rclone (`--s3-versions`,
//! `--s3-version-at`); curl on REST (history, restore, trash); one truth
//! across them (a version made through S3 is the one REST restores); and
//! the quota (a delete gains no room; an upload that needs it takes the
//! oldest trash).

use super::*;

/// The versioning suite against `server` as the key's owner.
async fn versions_suite(server: &S3TestServer, key: &(String, String)) {
    python_suite(server, key, "versions_suite.py", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_versioning_suite_passes_on_sqlite() {
    within(Duration::from_secs(600), async {
        let (server, key) = with_alice().await;
        versions_suite(&server, &key).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_versioning_suite_passes_on_postgres_and_seaweedfs() {
    within(Duration::from_secs(900), async {
        let (server, key, _backend) = on_postgres_and_seaweedfs("versions").await;
        versions_suite(&server, &key).await;
    })
    .await;
}

/// `curl` with alice's password, on the gateway's REST port: its status
/// and body.
async fn curl(args: &[&str]) -> (u16, String) {
    let mut command = Command::new("curl");
    if !args.contains(&"-o") {
        command.args(["-o", "-"]);
    }
    command
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(["-u", &format!("alice:{PASSWORD}")])
        .args(args);
    let output = run(command, Duration::from_secs(60)).await;
    let text = succeeded(&output, &format!("curl {}", args.join(" ")));
    let (body, status) = text.rsplit_once('\n').unwrap();
    (status.trim().parse().unwrap(), body.to_owned())
}

fn json_of(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_truth_across_s3_the_aws_cli_rclone_and_curl_on_rest() {
    within(Duration::from_secs(600), async {
        let (server, key) = with_alice().await;
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        aws_ok(&server, &key, dir, &["s3", "mb", "s3://hist"]).await;
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "put-bucket-versioning",
                "--bucket",
                "hist",
                "--versioning-configuration",
                "Status=Enabled",
            ],
        )
        .await;
        let state = aws_json(
            &server,
            &key,
            dir,
            &["s3api", "get-bucket-versioning", "--bucket", "hist"],
        )
        .await;
        assert_eq!(state["Status"], "Enabled", "{state}");

        // Three versions through the AWS CLI.
        let bodies: Vec<Vec<u8>> = (0..3).map(|_| random_bytes(3000)).collect();
        let mut ids = Vec::new();
        for (index, body) in bodies.iter().enumerate() {
            let file = dir.join(format!("v{index}"));
            std::fs::write(&file, body).unwrap();
            let put = aws_json(
                &server,
                &key,
                dir,
                &[
                    "s3api",
                    "put-object",
                    "--bucket",
                    "hist",
                    "--key",
                    "doc.bin",
                    "--body",
                    file.to_str().unwrap(),
                ],
            )
            .await;
            ids.push(put["VersionId"].as_str().unwrap().to_owned());
            // Distinct modification times for rclone's --s3-version-at.
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        let listed = aws_json(
            &server,
            &key,
            dir,
            &["s3api", "list-object-versions", "--bucket", "hist"],
        )
        .await;
        let versions: Vec<&str> = listed["Versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|version| version["VersionId"].as_str().unwrap())
            .collect();
        assert_eq!(versions, [&ids[2], &ids[1], &ids[0]], "{listed}");
        let out = dir.join("first.out");
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "hist",
                "--key",
                "doc.bin",
                "--version-id",
                &ids[0],
                out.to_str().unwrap(),
            ],
        )
        .await;
        assert!(std::fs::read(&out).unwrap() == bodies[0]);

        // rclone lists every version, and copies the object as it was.
        std::fs::write(dir.join("rclone.conf"), "").unwrap();
        let all = rclone(&server, &key, dir, &["lsf", "--s3-versions", "gw:hist"]).await;
        assert_eq!(all.lines().count(), 3, "rclone lsf --s3-versions: {all}");
        let second = aws_json(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "head-object",
                "--bucket",
                "hist",
                "--key",
                "doc.bin",
                "--version-id",
                &ids[1],
            ],
        )
        .await;
        // Just after the second version was made (its LastModified, to the
        // second), before the third.
        let made = just_after(second["LastModified"].as_str().unwrap());
        let then = dir.join("then");
        rclone(
            &server,
            &key,
            dir,
            &[
                "copy",
                "--s3-version-at",
                &made,
                "gw:hist/doc.bin",
                then.to_str().unwrap(),
            ],
        )
        .await;
        assert!(
            std::fs::read(then.join("doc.bin")).unwrap() == bodies[1],
            "rclone --s3-version-at {made}"
        );

        // The same history on REST (curl), and a restore there is the
        // current S3 object.
        let (status, body) = curl(&[&server.server.url("/files/hist/doc.bin?versions")]).await;
        assert_eq!(status, 200, "{body}");
        let history = json_of(&body);
        let rest_ids: Vec<&str> = history["versions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|version| version["version_id"].as_str().unwrap())
            .collect();
        assert_eq!(rest_ids, versions);
        let first = dir.join("first.rest");
        let (status, _) = curl(&[
            "-o",
            first.to_str().unwrap(),
            &server
                .server
                .url(&format!("/files/hist/doc.bin?version={}", ids[0])),
        ])
        .await;
        assert_eq!(status, 200);
        assert!(
            std::fs::read(&first).unwrap() == bodies[0],
            "?version= on REST"
        );
        let (status, restored) = curl(&[
            "-X",
            "POST",
            &server
                .server
                .url(&format!("/files/hist/doc.bin?restore={}", ids[0])),
        ])
        .await;
        assert_eq!(status, 200, "{restored}");
        let now = dir.join("now.out");
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "hist",
                "--key",
                "doc.bin",
                out_arg(&now),
            ],
        )
        .await;
        assert!(
            std::fs::read(&now).unwrap() == bodies[0],
            "the restored version through S3"
        );
        let listed = aws_json(
            &server,
            &key,
            dir,
            &["s3api", "list-object-versions", "--bucket", "hist"],
        )
        .await;
        assert_eq!(listed["Versions"].as_array().unwrap().len(), 4, "{listed}");

        // Deleted through S3: a marker; in the REST trash; restored there,
        // it is the current object again.
        let deleted = aws_json(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "delete-object",
                "--bucket",
                "hist",
                "--key",
                "doc.bin",
            ],
        )
        .await;
        assert_eq!(deleted["DeleteMarker"], true, "{deleted}");
        let (_, trash) = curl(&[&server.server.url("/trash")]).await;
        let trash = json_of(&trash);
        let item = trash["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| item["path"] == "hist/doc.bin")
            .unwrap_or_else(|| panic!("not in the trash: {trash}"))
            .clone();
        assert!(
            trash["usage"]["used"].as_u64().unwrap() >= 4 * 3000,
            "{trash}"
        );
        let (status, body) = curl(&[
            "-X",
            "POST",
            &server.server.url(&format!("/trash/{}/restore", item["id"])),
        ])
        .await;
        assert_eq!(status, 200, "{body}");
        aws_ok(
            &server,
            &key,
            dir,
            &[
                "s3api",
                "get-object",
                "--bucket",
                "hist",
                "--key",
                "doc.bin",
                out_arg(&now),
            ],
        )
        .await;
        assert!(std::fs::read(&now).unwrap() == bodies[0]);

        // A file deleted through REST, then removed for good; the trash
        // emptied.
        let (status, _) = curl(&[
            "-X",
            "PUT",
            "--data-binary",
            "scratch",
            &server.server.url("/files/notes/a.txt"),
        ])
        .await;
        assert_eq!(status, 201);
        let (status, _) = curl(&["-X", "DELETE", &server.server.url("/files/notes/a.txt")]).await;
        assert_eq!(status, 204);
        let (_, trash) = curl(&[&server.server.url("/trash")]).await;
        let trash = json_of(&trash);
        let item = &trash["items"][0];
        assert_eq!(item["path"], "notes/a.txt", "{trash}");
        let (status, _) = curl(&[
            "-X",
            "DELETE",
            &server.server.url(&format!("/trash/{}", item["id"])),
        ])
        .await;
        assert_eq!(status, 204);
        let (status, _) = curl(&[&server.server.url("/files/notes/a.txt?versions")]).await;
        assert_eq!(status, 404);
        let (status, body) = curl(&["-X", "DELETE", &server.server.url("/trash")]).await;
        assert_eq!(status, 200, "{body}");
        let (_, trash) = curl(&[&server.server.url("/trash")]).await;
        assert_eq!(json_of(&trash)["items"], serde_json::json!([]));
    })
    .await;
}

/// `--output`-less `get-object` takes the outfile as its last argument.
fn out_arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// A second after `modified` (`head-object`'s `LastModified`, an HTTP date
/// truncated to the second: so after the version it names, and before one
/// made 1.1 s later), in the form rclone's `--s3-version-at` takes.
fn just_after(modified: &str) -> String {
    let at = httpdate::parse_http_date(modified).unwrap_or_else(|e| panic!("{modified}: {e}"))
        + Duration::from_secs(1);
    humantime::format_rfc3339_millis(at).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_gains_no_room_and_an_upload_takes_the_oldest_trash() {
    within(Duration::from_secs(300), async {
        let server = S3TestServer::start(|_| {}).await;
        // Room for three 100 KiB files and their entries, not four.
        let quota = 3 * 100 * 1024 + 8 * 1024;
        server
            .server
            .add_user("alice", PASSWORD, false, Some(quota))
            .await;
        let auth = basic("alice");
        let put = |path: &str, fill: u8| {
            server
                .server
                .client
                .put(server.server.url(&format!("/files/{path}")))
                .header("authorization", &auth)
                .body(vec![fill; 100 * 1024])
                .send()
        };
        for (path, fill) in [("a", 1), ("b", 2), ("c", 3)] {
            assert_eq!(put(path, fill).await.unwrap().status(), 201);
        }
        let usage = |server: &S3TestServer| {
            let auth = auth.clone();
            let url = server.server.url("/files/?limit=1");
            let client = server.server.client.clone();
            async move {
                let listing: serde_json::Value = client
                    .get(url)
                    .header("authorization", auth)
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                listing["usage"]["used"].as_u64().unwrap()
            }
        };
        let before = usage(&server).await;
        let deleted = server
            .server
            .client
            .delete(server.server.url("/files/a"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap();
        assert_eq!(deleted.status(), 204);
        // In the trash: nothing freed (a delete marker's entry added).
        assert!(usage(&server).await >= before);
        // A fourth file needs the room: the trash's oldest goes.
        assert_eq!(put("d", 4).await.unwrap().status(), 201);
        let trash: serde_json::Value = server
            .server
            .client
            .get(server.server.url("/trash"))
            .header("authorization", &auth)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(trash["items"], serde_json::json!([]), "{trash}");
        for path in ["b", "c", "d"] {
            let got = server
                .server
                .client
                .get(server.server.url(&format!("/files/{path}")))
                .header("authorization", &auth)
                .send()
                .await
                .unwrap();
            assert_eq!(got.status(), 200, "{path}");
        }
        // And no room left to take: refused, nothing current lost.
        assert_eq!(put("e", 5).await.unwrap().status(), 507);
        assert!(metric(&server, "wasm_storage_versions_evicted_total").await >= 1);
    })
    .await;
}

/// `mc` (MinIO's client) on `server` as the key's owner (`MC_HOST_gw`), its
/// configuration in `dir`.
pub(super) async fn mc(
    server: &S3TestServer,
    key: &(String, String),
    dir: &Path,
    args: &[&str],
) -> String {
    let endpoint = server.endpoint();
    let host = endpoint.trim_start_matches("http://");
    let mut command = clean(&tool("mc"));
    command
        .env("MC_HOST_gw", format!("http://{}:{}@{host}", key.0, key.1))
        .arg("--config-dir")
        .arg(dir.join("mc"))
        .args(["--no-color", "--disable-pager"])
        .args(args);
    let output = run(command, Duration::from_secs(120)).await;
    succeeded(&output, &format!("mc {}", args.join(" ")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mc_enables_versioning_and_lists_every_version() {
    within(Duration::from_secs(300), async {
        let (server, key) = with_alice().await;
        let work = tempfile::tempdir().unwrap();
        let dir = work.path();
        mc(&server, &key, dir, &["mb", "gw/mcv"]).await;
        let info = mc(&server, &key, dir, &["version", "info", "gw/mcv"]).await;
        assert!(!info.contains("enabled"), "a new bucket: {info}");
        mc(&server, &key, dir, &["version", "enable", "gw/mcv"]).await;
        let info = mc(&server, &key, dir, &["version", "info", "gw/mcv"]).await;
        assert!(info.contains("versioning is enabled"), "{info}");
        for content in ["first draft", "second draft", "final"] {
            let file = dir.join("doc.txt");
            std::fs::write(&file, content).unwrap();
            mc(
                &server,
                &key,
                dir,
                &["cp", file.to_str().unwrap(), "gw/mcv/doc.txt"],
            )
            .await;
        }
        mc(&server, &key, dir, &["rm", "gw/mcv/doc.txt"]).await;
        let listed = mc(&server, &key, dir, &["ls", "--versions", "gw/mcv"]).await;
        let lines: Vec<&str> = listed
            .lines()
            .filter(|line| line.contains("doc.txt"))
            .collect();
        // Three versions and the delete marker, newest first.
        assert_eq!(lines.len(), 4, "mc ls --versions:\n{listed}");
        assert!(
            lines[0].contains("DEL"),
            "the delete marker first:\n{listed}"
        );
        let got = mc(
            &server,
            &key,
            dir,
            &[
                "cat",
                "--version-id",
                &version_of(lines[1]),
                "gw/mcv/doc.txt",
            ],
        )
        .await;
        assert_eq!(got, "final");
        mc(&server, &key, dir, &["version", "suspend", "gw/mcv"]).await;
        let info = mc(&server, &key, dir, &["version", "info", "gw/mcv"]).await;
        assert!(info.contains("suspended"), "{info}");
    })
    .await;
}

/// The version id in a line of `mc ls --versions` (the field before
/// `v<N>`, or the one ending the metadata).
fn version_of(line: &str) -> String {
    line.split_whitespace()
        .find(|field| field.len() == 32 && field.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no version id in {line:?}"))
        .to_owned()
}
