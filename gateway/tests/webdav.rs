//! WebDAV through real clients no one on this project wrote: Debian's
//! `litmus` (every test of its five groups must pass) and `rclone` (a tree
//! copied up, checked, synced back down byte for byte, and read through the
//! REST API), both against a real gateway with a user signing in by HTTP
//! Basic, on both backends: SQLite + a directory, and PostgreSQL + S3
//! (SeaweedFS). Plus the protocol's corners litmus leaves alone.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::{TestServer, random_bytes};
use reqwest::{Method, StatusCode};

const PASSWORD: &str = "a long webdav password";

/// Run `command` to completion off the runtime's threads (the server keeps
/// serving), killing it after `limit`.
async fn run(mut command: Command, limit: Duration) -> Output {
    let name = format!("{command:?}");
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("{name} did not start ({error}); is it installed?"));
        let started = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if started.elapsed() > limit {
                child.kill().unwrap();
                let output = child.wait_with_output().unwrap();
                panic!(
                    "{name} ran longer than {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// Where a test gateway keeps its files.
enum Backend {
    /// The embedded default: SQLite and a local directory.
    SqliteLocal,
    /// What a scale-out shares: a real PostgreSQL and a real S3 server,
    /// started for the test and stopped by PID when it ends.
    PostgresS3(Box<(testsupport::Postgres, testsupport::Seaweed)>),
}

impl Backend {
    async fn postgres_s3() -> Self {
        tokio::task::spawn_blocking(|| {
            Self::PostgresS3(Box::new((
                testsupport::Postgres::start().unwrap(),
                testsupport::Seaweed::start("webdav").unwrap(),
            )))
        })
        .await
        .unwrap()
    }

    fn configure(&self, config: &mut gateway::config::Config) {
        if let Self::PostgresS3(servers) = self {
            let (postgres, seaweed) = &**servers;
            config.database_url = Some(postgres.url("postgres").parse().unwrap());
            config.blob_store = Some(format!("s3://{}/blobs", seaweed.bucket()).parse().unwrap());
            config.s3 = volume::S3Settings {
                endpoint: Some(seaweed.endpoint()),
                region: Some(seaweed.region().to_owned()),
                access_key_id: Some(seaweed.access_key().to_owned()),
                secret_access_key: Some(seaweed.secret_key().to_owned()),
                allow_http: Some(true),
            };
        }
    }
}

async fn server_with_user(name: &str, backend: &Backend) -> TestServer {
    let server = TestServer::start(|config| backend.configure(config)).await;
    server.add_user(name, PASSWORD, false, None).await;
    server
}

fn basic(name: &str) -> String {
    let pair = format!("{name}:{PASSWORD}");
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litmus_passes_every_test_of_its_five_groups_on_sqlite() {
    litmus_passes_every_test_of_its_five_groups(&Backend::SqliteLocal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn litmus_passes_every_test_of_its_five_groups_on_postgres_s3() {
    litmus_passes_every_test_of_its_five_groups(&Backend::postgres_s3().await).await;
}

async fn litmus_passes_every_test_of_its_five_groups(backend: &Backend) {
    let server = server_with_user("litmus", backend).await;
    // litmus writes its debug.log and child.log where it runs.
    let logs = tempfile::tempdir().unwrap();
    let mut command = Command::new("litmus");
    command
        .current_dir(logs.path())
        .env("TESTS", "basic copymove props locks http")
        .arg(server.url("/dav/"))
        .arg("litmus")
        .arg(PASSWORD);
    let output = run(command, Duration::from_secs(300)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    let summaries: Vec<&str> = stdout
        .lines()
        .filter(|line| line.starts_with("<- summary for"))
        .collect();
    assert_eq!(summaries.len(), 5, "five groups ran:\n{stdout}");
    for summary in &summaries {
        // "<- summary for `basic': of 16 tests run: 16 passed, 0 failed. 100.0%"
        let counts: Vec<u32> = summary
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse().ok())
            .collect();
        assert!(
            counts.len() >= 3 && counts[0] == counts[1] && counts[2] == 0,
            "not every test passed: {summary}\n{stdout}"
        );
    }
    assert!(output.status.success(), "litmus failed:\n{stdout}");
    // The litmus tree was the user's, and nothing was left in the open one.
    let open_listing = server
        .state
        .volume
        .list(volume::Owner::OPEN, &volume::Prefix::root(), None, 10)
        .await
        .unwrap();
    assert!(open_listing.entries.is_empty());
    server.stop().await;
}

/// A local tree with nested folders, an empty folder, unicode names, an
/// empty file and a multi-megabyte one.
fn make_tree(root: &Path) -> Vec<(String, Vec<u8>)> {
    let files = vec![
        ("top.txt".to_owned(), b"at the top\n".to_vec()),
        ("empty.bin".to_owned(), Vec::new()),
        (
            "big/blob.bin".to_owned(),
            random_bytes(5 * 1024 * 1024 + 17),
        ),
        ("a/b/c/deep.txt".to_owned(), b"deep down\n".to_vec()),
        ("résumé €/naïve café.txt".to_owned(), "unicode ✓\n".into()),
        ("日本語/ファイル.txt".to_owned(), "こんにちは\n".into()),
        (
            "with space/and+plus&amp.txt".to_owned(),
            b"odd names\n".to_vec(),
        ),
    ];
    for (path, bytes) in &files {
        let full = root.join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, bytes).unwrap();
    }
    std::fs::create_dir_all(root.join("empty folder")).unwrap();
    files
}

async fn rclone(config: &Path, args: &[&str]) -> Output {
    let mut command = Command::new("rclone");
    command
        .env("RCLONE_CONFIG", config)
        .env_remove("AWS_CA_BUNDLE")
        .args(["--retries", "1", "--low-level-retries", "2"])
        .args(args);
    run(command, Duration::from_secs(300)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rclone_copies_a_tree_up_checks_it_and_syncs_it_back_down_on_sqlite() {
    rclone_copies_a_tree_up_checks_it_and_syncs_it_back_down(&Backend::SqliteLocal).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rclone_copies_a_tree_up_checks_it_and_syncs_it_back_down_on_postgres_s3() {
    rclone_copies_a_tree_up_checks_it_and_syncs_it_back_down(&Backend::postgres_s3().await).await;
}

async fn rclone_copies_a_tree_up_checks_it_and_syncs_it_back_down(backend: &Backend) {
    let server = server_with_user("alice", backend).await;
    let work = tempfile::tempdir().unwrap();
    let up = work.path().join("up");
    let down = work.path().join("down");
    std::fs::create_dir_all(&down).unwrap();
    let files = make_tree(&up);

    let obscured = {
        let mut command = Command::new("rclone");
        command.args(["obscure", PASSWORD]);
        let output = run(command, Duration::from_secs(30)).await;
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    let config = work.path().join("rclone.conf");
    std::fs::write(
        &config,
        format!(
            "[dav]\ntype = webdav\nurl = {}\nvendor = other\nuser = alice\npass = {obscured}\n",
            server.url("/dav/")
        ),
    )
    .unwrap();
    let check = |output: &Output, what: &str| {
        assert!(
            output.status.success(),
            "rclone {what} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let up_arg = up.to_str().unwrap();
    let down_arg = down.to_str().unwrap();
    let output = rclone(
        &config,
        &["copy", "--create-empty-src-dirs", up_arg, "dav:tree"],
    )
    .await;
    check(&output, "copy");
    let output = rclone(&config, &["check", up_arg, "dav:tree"]).await;
    check(&output, "check");
    let output = rclone(
        &config,
        &["sync", "--create-empty-src-dirs", "dav:tree", down_arg],
    )
    .await;
    check(&output, "sync");

    for (path, bytes) in &files {
        assert_eq!(
            &std::fs::read(down.join(path)).unwrap(),
            bytes,
            "{path} synced down"
        );
        let url = format!(
            "/files/tree/{}",
            path.split('/')
                .map(|segment| percent_encoding::utf8_percent_encode(
                    segment,
                    percent_encoding::NON_ALPHANUMERIC
                )
                .to_string())
                .collect::<Vec<_>>()
                .join("/")
        );
        let response = server
            .client
            .get(server.url(&url))
            .header("authorization", basic("alice"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        assert_eq!(&response.bytes().await.unwrap()[..], &bytes[..], "{url}");
    }
    assert!(
        down.join("empty folder").is_dir(),
        "the empty folder came down"
    );
    let listing: serde_json::Value = server
        .client
        .get(server.url("/files/tree/"))
        .header("authorization", basic("alice"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"empty folder/"), "{names:?}");
    server.stop().await;
}

/// The multistatus of a `PROPFIND` at `depth`, as carol.
async fn propfind_text(server: &TestServer, path: &str, depth: &str) -> String {
    dav(server, "PROPFIND", path)
        .header("depth", depth)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn dav(server: &TestServer, method: &str, path: &str) -> reqwest::RequestBuilder {
    server
        .client
        .request(
            Method::from_bytes(method.as_bytes()).unwrap(),
            server.url(path),
        )
        .header("authorization", basic("carol"))
}

#[tokio::test]
async fn protocol_corners() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    server.add_user("carol", PASSWORD, false, None).await;
    // Credentials are needed, and Basic is offered.
    let anonymous = server
        .client
        .request(
            Method::from_bytes(b"PROPFIND").unwrap(),
            server.url("/dav/"),
        )
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert!(
        anonymous
            .headers()
            .get_all("www-authenticate")
            .iter()
            .any(|value| value.to_str().unwrap().starts_with("Basic"))
    );
    // OPTIONS says class 1 and 2.
    let options = dav(&server, "OPTIONS", "/dav/").send().await.unwrap();
    assert_eq!(options.headers()["dav"], "1, 2");
    // Depth infinity is refused, with the RFC's precondition element.
    let infinite = dav(&server, "PROPFIND", "/dav/")
        .header("depth", "infinity")
        .send()
        .await
        .unwrap();
    assert_eq!(infinite.status(), StatusCode::FORBIDDEN);
    assert!(
        infinite
            .text()
            .await
            .unwrap()
            .contains("propfind-finite-depth")
    );
    // A file made through the REST API is a resource; its folder a collection.
    let put = server
        .client
        .put(server.url("/files/docs/a.txt"))
        .header("authorization", basic("carol"))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::CREATED);
    let listing = dav(&server, "PROPFIND", "/dav/docs")
        .header("depth", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(listing.status(), StatusCode::MULTI_STATUS);
    let text = listing.text().await.unwrap();
    assert!(text.contains("<D:href>/dav/docs/</D:href>"), "{text}");
    assert!(text.contains("<D:href>/dav/docs/a.txt</D:href>"), "{text}");
    assert!(text.contains("<D:collection/>"), "{text}");
    assert!(
        text.contains("<D:getcontentlength>5</D:getcontentlength>"),
        "{text}"
    );
    assert!(
        text.contains("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"),
        "the etag is the digest: {text}"
    );
    // COPY is rows, not bytes: the blob count does not change.
    let blobs = common::stored_blobs(&server.data_dir).len();
    let copy = dav(&server, "COPY", "/dav/docs/")
        .header("destination", server.url("/dav/copy/"))
        .send()
        .await
        .unwrap();
    assert_eq!(copy.status(), StatusCode::CREATED);
    assert!(
        copy.headers()["location"]
            .to_str()
            .unwrap()
            .ends_with("/dav/copy/")
    );
    assert_eq!(common::stored_blobs(&server.data_dir).len(), blobs);
    let copied = dav(&server, "GET", "/dav/copy/a.txt").send().await.unwrap();
    assert_eq!(copied.text().await.unwrap(), "hello");
    // Into a folder that does not exist: 409; onto another server: 502.
    let nowhere = dav(&server, "COPY", "/dav/docs/a.txt")
        .header("destination", server.url("/dav/none/a.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(nowhere.status(), StatusCode::CONFLICT);
    // Behind a proxy that names itself in X-Forwarded-Host, and with the
    // default port spelt out, the destination is still ours; a file moves
    // whatever Depth says.
    let proxied = dav(&server, "MOVE", "/dav/copy/a.txt")
        .header("x-forwarded-host", "files.example")
        .header("destination", "http://files.example:80/dav/copy/b.txt")
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(proxied.status(), StatusCode::CREATED);
    let elsewhere = dav(&server, "MOVE", "/dav/docs/a.txt")
        .header("destination", "http://elsewhere.example/dav/a.txt")
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), StatusCode::BAD_GATEWAY);
    // A folder cannot go inside itself.
    let inside = dav(&server, "MOVE", "/dav/docs/")
        .header("destination", server.url("/dav/docs/sub/"))
        .send()
        .await
        .unwrap();
    assert_eq!(inside.status(), StatusCode::FORBIDDEN);
    // Another user sees none of it.
    server.add_user("dave", PASSWORD, false, None).await;
    let theirs = server
        .client
        .request(
            Method::from_bytes(b"PROPFIND").unwrap(),
            server.url("/dav/docs/"),
        )
        .header("authorization", basic("dave"))
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    // A lock blocks a write that does not submit its token.
    let lock = dav(&server, "LOCK", "/dav/docs/a.txt")
        .body("<?xml version=\"1.0\"?><lockinfo xmlns=\"DAV:\"><lockscope><exclusive/></lockscope><locktype><write/></locktype><owner>me</owner></lockinfo>")
        .send()
        .await
        .unwrap();
    assert_eq!(lock.status(), StatusCode::OK);
    let token = lock.headers()["lock-token"].to_str().unwrap().to_owned();
    let blocked = dav(&server, "PUT", "/dav/docs/a.txt")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(blocked.status(), StatusCode::LOCKED);
    let why = blocked.text().await.unwrap();
    assert!(
        why.contains("<D:lock-token-submitted><D:href>/dav/docs/a.txt</D:href>"),
        "{why}"
    );
    let allowed = dav(&server, "PUT", "/dav/docs/a.txt")
        .header("if", format!("({token})"))
        .body("changed")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), StatusCode::NO_CONTENT);
    let unlock = dav(&server, "UNLOCK", "/dav/docs/a.txt")
        .header("lock-token", &token)
        .send()
        .await
        .unwrap();
    assert_eq!(unlock.status(), StatusCode::NO_CONTENT);
    // Hostile bodies cost little and change nothing.
    let before = propfind_text(&server, "/dav/docs/a.txt", "0").await;
    let deep = format!(
        "<propertyupdate xmlns=\"DAV:\"><set><prop><x xmlns=\"urn:x\">{}{}</x></prop></set></propertyupdate>",
        "<a>".repeat(10_000),
        "</a>".repeat(10_000)
    );
    let entity_bomb = "<?xml version=\"1.0\"?><!DOCTYPE p [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\">]>\
        <propertyupdate xmlns=\"DAV:\"><set><prop><x xmlns=\"urn:x\">&b;</x></prop></set></propertyupdate>";
    for (body, status) in [
        (deep, StatusCode::BAD_REQUEST),
        (entity_bomb.to_owned(), StatusCode::BAD_REQUEST),
        (
            "<propertyupdate xmlns=\"DAV:\"><set>".to_owned(),
            StatusCode::BAD_REQUEST,
        ),
        ("x".repeat(2 << 20), StatusCode::PAYLOAD_TOO_LARGE),
    ] {
        let answer = dav(&server, "PROPPATCH", "/dav/docs/a.txt")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), status);
    }
    let after = propfind_text(&server, "/dav/docs/a.txt", "0").await;
    assert_eq!(before, after, "nothing was stored");
    let unknown = dav(&server, "PATCH", "/dav/docs/a.txt")
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        unknown.headers()["allow"]
            .to_str()
            .unwrap()
            .contains("PROPFIND")
    );
    // MKCOL survives a restart as an empty collection.
    let mkcol = dav(&server, "MKCOL", "/dav/kept/").send().await.unwrap();
    assert_eq!(mkcol.status(), StatusCode::CREATED);
    // A folder made on purpose has its date in a Depth 1 listing too.
    let root = propfind_text(&server, "/dav/", "1").await;
    let kept = root
        .split("<D:response>")
        .find(|response| response.contains("<D:href>/dav/kept/</D:href>"))
        .unwrap();
    assert!(kept.contains("<D:getlastmodified>"), "{kept}");
    server.stop().await;
    let again = TestServer::start_in(dir.path(), |_| {}).await;
    let kept = dav(&again, "PROPFIND", "/dav/kept/")
        .header("depth", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), StatusCode::MULTI_STATUS);
    again.stop().await;
}

// ---------------------------------------------------------------------------
// If-Range: a resumed download of a replaced file gets the whole new file.

#[tokio::test]
async fn if_range_sends_the_whole_new_file_for_an_old_validator() {
    use common::{IF_RANGE_NEW, IF_RANGE_OLD, assert_if_range};
    let server = TestServer::start(|_| {}).await;
    let url = server.url("/dav/resume.txt");
    let put = |body: &'static [u8]| {
        let request = server.client.put(&url).body(body);
        async move { request.send().await.unwrap().status() }
    };
    assert!(put(IF_RANGE_OLD).await.is_success());
    let first = server.client.get(&url).send().await.unwrap();
    let old_etag = first.headers()["etag"].to_str().unwrap().to_owned();
    assert!(put(IF_RANGE_NEW).await.is_success());
    assert_if_range(&server.client, &url, None, &old_etag).await;
    server.stop().await;
}
