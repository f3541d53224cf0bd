//! The web page in a real headless Chromium, driven through ChromeDriver:
//! upload through the file input, see the file listed with its SHA-256,
//! download it through the browser, delete it, and see the pool panel;
//! with users, sign in (a wrong password first), upload, and sign out.
//! The file manager: a WebM made by ffmpeg, uploaded through the page, plays
//! and seeks to its middle by range requests (seen at the gateway through a
//! recording proxy); text previews, share links with an expiry, rename,
//! drag-to-folder moves, sorting, several files ticked and deleted, and a
//! large download with progress.
//! Resumable uploads (tus, issue 23): a 200 MB upload through the page
//! survives a gateway restart, and a reload mid-upload offers to resume it;
//! the recording proxy counts the bytes each PATCH passed on.
//! Versions and trash (issue 32): a file deleted in the page comes back from
//! the Trash view byte for byte, and an overwritten one from its History.
//!
//! Needs Debian's `chromium`, `chromium-driver` and `ffmpeg`
//! (`scripts/install-test-deps.sh` installs them).

#![allow(clippy::unwrap_used)]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::browser::Driver;
use common::{TestServer, random_bytes, sha256_hex};
use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
use fantoccini::{Client, Locator};
use gateway::recycler::Mode;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client as LegacyClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

/// Wait until `ready` holds, polling, or fail after 20 s.
async fn eventually<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = Instant::now() + Duration::from_secs(20);
    while !ready().await {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether the element with this id exists and is shown.
async fn shown(browser: &Client, id: &str) -> bool {
    match browser.find(Locator::Id(id)).await {
        Ok(element) => element.is_displayed().await.unwrap(),
        Err(_) => false,
    }
}

/// The text of the element with this id.
async fn text_of(browser: &Client, id: &str) -> String {
    browser
        .find(Locator::Id(id))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn downloaded(dir: &Path, name: &str) -> Option<PathBuf> {
    let path = dir.join(name);
    // Chromium writes `<name>.crdownload` first and renames when complete.
    path.exists().then_some(path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_browse_download_delete_and_watch_the_pool_in_chromium() {
    let server = TestServer::start(|config| {
        config.instances = 3;
        config.estimator_mode = Mode::Monitor;
        config.sample_interval = Duration::from_millis(200);
    })
    .await;
    // Something to browse besides our upload.
    server
        .put("photos/2024/beach.jpg", b"\xff\xd8\xff fake jpeg".to_vec())
        .await;
    server
        .put("notes.txt", b"remember the milk\n".to_vec())
        .await;

    let scratch = tempfile::tempdir().unwrap();
    let (profile, downloads) = (
        scratch.path().join("profile"),
        scratch.path().join("downloads"),
    );
    std::fs::create_dir_all(&downloads).unwrap();
    let content = random_bytes(300_000);
    let upload = scratch.path().join("e2e-upload.bin");
    std::fs::write(&upload, &content).unwrap();
    let digest = sha256_hex(&content);

    let driver = Driver::start().await;
    let browser = driver.browser(&profile, Some(&downloads)).await;
    browser.goto(&server.url("/")).await.unwrap();

    // The pool panel draws one bar per instance.
    eventually("the pool panel's bars", || async {
        browser
            .find_all(Locator::Css("#instances li .track"))
            .await
            .unwrap()
            .len()
            == 3
    })
    .await;
    // No users on loopback: open mode, no sign-in.
    assert!(!shown(&browser, "signin").await);
    assert!(shown(&browser, "mode-note").await);
    let bar = browser
        .find(Locator::Css("#instances li .track"))
        .await
        .unwrap();
    assert!(
        bar.attr("aria-label")
            .await
            .unwrap()
            .unwrap()
            .starts_with("instance ")
    );
    // The facts name the memory budget and what is reserved against it.
    eventually("the memory budget in the pool facts", || async {
        browser
            .find(Locator::Id("pool-facts"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
            .contains("memory budget")
    })
    .await;

    // Upload through the file input.
    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(upload.to_str().unwrap()).await.unwrap();
    let row = "tr[data-path=\"e2e-upload.bin\"]";
    eventually("the uploaded file in the listing", || async {
        browser.find(Locator::Css(row)).await.is_ok()
    })
    .await;
    let listed = browser.find(Locator::Css(row)).await.unwrap();
    assert_eq!(
        listed.attr("data-sha256").await.unwrap().as_deref(),
        Some(digest.as_str())
    );
    let shown = browser
        .find(Locator::Css("#uploads code.sha"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(shown, digest, "the upload result shows the SHA-256");
    let folder = browser.find(Locator::LinkText("photos/")).await;
    assert!(folder.is_ok(), "folders are listed");

    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-page.png");
    std::fs::write(&screenshot, browser.screenshot().await.unwrap()).unwrap();
    println!("screenshot: {}", screenshot.display());

    // Download through the browser and compare bytes.
    listed
        .find(Locator::Css("a[download]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the download", || async {
        downloaded(&downloads, "e2e-upload.bin").is_some()
    })
    .await;
    let fetched = std::fs::read(downloaded(&downloads, "e2e-upload.bin").unwrap()).unwrap();
    assert_eq!(sha256_hex(&fetched), digest);
    assert!(fetched == content);

    // Delete, confirming the dialog.
    listed
        .find(Locator::Css("button.danger"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.accept_alert().await.unwrap();
    eventually("the row to go", || async {
        browser.find(Locator::Css(row)).await.is_err()
    })
    .await;
    assert_eq!(
        server.get("e2e-upload.bin").await.status(),
        reqwest::StatusCode::NOT_FOUND
    );

    // Into a folder by its link: breadcrumbs follow.
    browser
        .find(Locator::LinkText("photos/"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the folder's contents", || async {
        browser.find(Locator::LinkText("2024/")).await.is_ok()
    })
    .await;
    let crumbs = browser
        .find(Locator::Id("crumbs"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(crumbs, "root / photos");

    // A new, empty folder: made here, listed, kept; then deleted.
    let name = browser.find(Locator::Id("new-folder-name")).await.unwrap();
    name.send_keys("empty").await.unwrap();
    browser
        .find(Locator::Id("new-folder-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the new folder's row", || async {
        browser.find(Locator::LinkText("empty/")).await.is_ok()
    })
    .await;
    let listing = server.json("/files/photos/").await;
    assert!(
        listing["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|entry| entry["path"] == "photos/empty/" && entry["type"] == "folder"),
        "{listing}"
    );
    browser
        .find(Locator::Css("button[aria-label='Delete folder empty/']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser.accept_alert().await.unwrap();
    eventually("the folder's row to go", || async {
        browser.find(Locator::LinkText("empty/")).await.is_err()
    })
    .await;

    browser.close().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signs_in_and_out() {
    const PASSWORD: &str = "correct horse battery staple";
    let server = TestServer::start(|_| {}).await;
    server.add_user("alice", PASSWORD, false, None).await;
    server
        .add_user("bob", "another long password", false, None)
        .await;
    let alice = server.create_token("alice").await;
    let bob = server.create_token("bob").await;

    let scratch = tempfile::tempdir().unwrap();
    let (profile, downloads) = (
        scratch.path().join("profile"),
        scratch.path().join("downloads"),
    );
    let content = random_bytes(100_000);
    let upload = scratch.path().join("alice-upload.bin");
    std::fs::write(&upload, &content).unwrap();
    let digest = sha256_hex(&content);

    let driver = Driver::start().await;
    let browser = driver.browser(&profile, Some(&downloads)).await;
    browser.goto(&server.url("/")).await.unwrap();

    eventually("the sign-in form", || shown(&browser, "signin")).await;
    assert!(
        !shown(&browser, "files-title").await,
        "no files before signing in"
    );

    // A wrong password first.
    let name = browser.find(Locator::Id("signin-name")).await.unwrap();
    let password = browser.find(Locator::Id("signin-password")).await.unwrap();
    let submit = browser.find(Locator::Id("signin-submit")).await.unwrap();
    name.send_keys("alice").await.unwrap();
    password.send_keys("wrong password").await.unwrap();
    submit.click().await.unwrap();
    eventually("the sign-in error", || async {
        !text_of(&browser, "signin-error").await.is_empty()
    })
    .await;
    assert_eq!(
        text_of(&browser, "signin-error").await,
        "wrong name or password"
    );
    assert!(!shown(&browser, "files-title").await);

    // Then the right one.
    password.clear().await.unwrap();
    password.send_keys(PASSWORD).await.unwrap();
    submit.click().await.unwrap();
    eventually("the files after signing in", || {
        shown(&browser, "files-title")
    })
    .await;
    assert!(!shown(&browser, "signin").await);
    assert!(text_of(&browser, "whoami").await.contains("alice"));
    eventually("the pool panel to hide from a non-admin", || async {
        !shown(&browser, "pool-panel").await
    })
    .await;

    // The session cookie is there, but out of the page's reach.
    let cookie = browser.get_named_cookie("wst_session").await.unwrap();
    assert_eq!(cookie.http_only(), Some(true));
    let visible = browser
        .execute("return document.cookie", Vec::new())
        .await
        .unwrap();
    assert!(
        !visible.as_str().unwrap().contains("wst_session"),
        "document.cookie shows the session: {visible}"
    );

    // Upload through the file input (a PUT that needs the CSRF token).
    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(upload.to_str().unwrap()).await.unwrap();
    let row = "tr[data-path=\"alice-upload.bin\"]";
    eventually("the uploaded file in the listing", || async {
        browser.find(Locator::Css(row)).await.is_ok()
    })
    .await;
    let listed = browser.find(Locator::Css(row)).await.unwrap();
    assert_eq!(
        listed.attr("data-sha256").await.unwrap().as_deref(),
        Some(digest.as_str())
    );
    eventually("the usage", || async {
        text_of(&browser, "usage").await.contains("used")
    })
    .await;

    // It is in alice's tree, and only there.
    let listing: serde_json::Value = server
        .client
        .get(server.url("/files/"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entry = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["path"] == "alice-upload.bin")
        .unwrap_or_else(|| panic!("not in alice's listing: {listing}"));
    assert_eq!(entry["sha256"], digest.as_str());
    let fetched = server
        .client
        .get(server.url("/files/alice-upload.bin"))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(fetched.status(), reqwest::StatusCode::OK);
    assert_eq!(sha256_hex(&fetched.bytes().await.unwrap()), digest);
    let theirs = server
        .client
        .get(server.url("/files/alice-upload.bin"))
        .bearer_auth(&bob)
        .send()
        .await
        .unwrap();
    assert_eq!(theirs.status(), reqwest::StatusCode::NOT_FOUND);

    // Sign out: the form again, and the browser has no way in.
    browser
        .find(Locator::Id("signout"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the sign-in form after signing out", || {
        shown(&browser, "signin")
    })
    .await;
    assert!(!shown(&browser, "files-title").await);
    assert!(!shown(&browser, "whoami").await);
    assert!(
        browser.find(Locator::Css(row)).await.is_err(),
        "the listing is cleared"
    );
    let status = browser
        .execute("return fetch('/files/').then((r) => r.status)", Vec::new())
        .await
        .unwrap();
    assert_eq!(status, json!(401));

    browser.close().await.unwrap();
    server.stop().await;
}

/// One request the recording proxy passed on, and the status the gateway
/// answered it with.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    range: Option<String>,
    /// The request's `Upload-Offset` (tus).
    offset: Option<u64>,
    /// The request's `Content-Length`: the bytes the browser meant to send.
    length: Option<u64>,
    /// The body's bytes passed on to the gateway (all of them when it
    /// answered, fewer when it could not be reached or dropped the request).
    forwarded: u64,
    /// 0: the gateway could not be reached (or dropped the connection).
    status: u16,
}

/// A reverse proxy on a free loopback port in front of the gateway, for the
/// browser to talk to: it writes down every request's method, path and
/// `Range` and the status the gateway answered. The gateway counts no
/// ranges in `/metrics` and keeps no access log, and what the page's
/// `performance` entries say is the browser's view, so this is how a test
/// sees what the server was asked and what it answered.
struct RecordingProxy {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RecordingProxy {
    async fn start(upstream: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let client: LegacyClient<HttpConnector, ProxyBody> =
            LegacyClient::builder(TokioExecutor::new()).build_http();
        let log = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (client, log) = (client.clone(), Arc::clone(&log));
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        forward(client.clone(), Arc::clone(&log), upstream, request)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, seen, task }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for RecordingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Pass `request` on to `upstream` as it came (its `Host` too, so the
/// gateway sees the address the browser used), and note it with the status.
/// A request body on its way through the proxy, counted as it goes.
type ProxyBody = http_body_util::combinators::BoxBody<bytes::Bytes, hyper::Error>;

async fn forward(
    client: LegacyClient<HttpConnector, ProxyBody>,
    log: Arc<Mutex<Vec<Seen>>>,
    upstream: SocketAddr,
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Incoming>, hyper_util::client::legacy::Error> {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let header = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let range = header("range");
    let offset = header("upload-offset").and_then(|value| value.parse().ok());
    let length = header("content-length").and_then(|value| value.parse().ok());
    let target = format!(
        "http://{upstream}{}",
        request.uri().path_and_query().map_or("/", |pq| pq.as_str())
    );
    let forwarded = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&forwarded);
    let mut request = request.map(|body| {
        body.map_frame(move |frame| {
            if let Some(data) = frame.data_ref() {
                counter.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
            frame
        })
        .boxed()
    });
    *request.uri_mut() = target.parse().unwrap();
    let response = client.request(request).await;
    log.lock().unwrap().push(Seen {
        method,
        path,
        range,
        offset,
        length,
        forwarded: forwarded.load(Ordering::Relaxed),
        status: response
            .as_ref()
            .map_or(0, |response| response.status().as_u16()),
    });
    response
}

/// Debian's `ffmpeg` from PATH. Without it the video test fails (it does
/// not skip): the page's player would go untested.
fn ffmpeg() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("ffmpeg"))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "ffmpeg is not on PATH: install Debian's ffmpeg (apt-get install ffmpeg, as \
                 scripts/install-test-deps.sh does); the video test makes its WebM with it"
            )
        })
}

/// A 10 s, 320×240, 25 fps VP8 WebM of ffmpeg's test pattern, a key frame
/// every second. Noise and 4 Mbit/s make it about 5 MB (in a second of
/// encoding): more than the player reads ahead, so seeking to the middle
/// needs bytes it has not got, as with a real film; a 200 KB clip would
/// arrive whole with the first request.
fn make_webm(path: &Path) {
    let output = std::process::Command::new(ffmpeg())
        .args(["-hide_banner", "-loglevel", "error", "-f", "lavfi", "-i"])
        .arg("testsrc=duration=10:size=320x240:rate=25")
        .args(["-vf", "noise=alls=80:allf=t", "-c:v", "libvpx"])
        .args(["-deadline", "realtime", "-cpu-used", "8"])
        .args([
            "-b:v", "4M", "-minrate", "4M", "-maxrate", "4M", "-bufsize", "4M",
        ])
        .args(["-g", "25", "-y"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "ffmpeg could not make the test video: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The JavaScript value `script` returns.
async fn eval(browser: &Client, script: &str) -> serde_json::Value {
    browser.execute(script, Vec::new()).await.unwrap()
}

/// The data-path of each listed row, in the order shown.
async fn listed_paths(browser: &Client) -> Vec<String> {
    let paths = eval(
        browser,
        "return [...document.querySelectorAll('#listing tr[data-path]')].map((row) => row.dataset.path)",
    )
    .await;
    serde_json::from_value(paths).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webm_uploaded_through_the_page_plays_and_seeks_by_range_requests_in_chromium() {
    let scratch = tempfile::tempdir().unwrap();
    let video = scratch.path().join("clip.webm");
    make_webm(&video);
    let bytes = std::fs::read(&video).unwrap();

    let server = TestServer::start(|_| {}).await;
    let proxy = RecordingProxy::start(server.addr).await;
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&proxy.url("/")).await.unwrap();
    eventually("the page", || shown(&browser, "files-title")).await;

    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(video.to_str().unwrap()).await.unwrap();
    let row = "tr[data-path=\"clip.webm\"]";
    eventually("the uploaded video in the listing", || async {
        browser.find(Locator::Css(row)).await.is_ok()
    })
    .await;
    let stored = server.get("clip.webm").await;
    assert_eq!(
        stored.headers()["content-type"],
        "video/webm",
        "the page sent the file's type"
    );
    assert!(stored.bytes().await.unwrap() == bytes);

    // Open it in the player: the name is the preview button.
    browser
        .find(Locator::Css(&format!("{row} td.name button")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the player", || async {
        browser.find(Locator::Css("#preview video")).await.is_ok()
    })
    .await;
    eventually("the video's first frame (readyState ≥ 2)", || async {
        eval(
            &browser,
            "return document.querySelector('#preview video').readyState",
        )
        .await
        .as_u64()
        .unwrap()
            >= 2
    })
    .await;
    let duration = eval(
        &browser,
        "return document.querySelector('#preview video').duration",
    )
    .await
    .as_f64()
    .unwrap();
    assert!((duration - 10.0).abs() < 0.2, "duration {duration}");

    // Seek to the middle; once it has, draw the frame shown and count the
    // colours in it (ffmpeg's test pattern has many; a frame never decoded
    // draws nothing).
    let seek = r"
        const done = arguments[arguments.length - 1];
        const video = document.querySelector('#preview video');
        let presented = null;
        if (video.requestVideoFrameCallback) {
          video.requestVideoFrameCallback((now, frame) => { presented = frame.mediaTime; });
        }
        const timer = setTimeout(() => done({ error: 'no seeked event in 20 s', time: video.currentTime }), 20000);
        video.addEventListener('seeked', () => {
          setTimeout(() => {
            clearTimeout(timer);
            const canvas = document.createElement('canvas');
            canvas.width = 64; canvas.height = 48;
            const g = canvas.getContext('2d');
            g.drawImage(video, 0, 0, 64, 48);
            const pixels = g.getImageData(0, 0, 64, 48).data;
            const colours = new Set();
            for (let i = 0; i < pixels.length; i += 4) colours.add((pixels[i] << 16) | (pixels[i + 1] << 8) | pixels[i + 2]);
            done({
              time: video.currentTime,
              frames: video.getVideoPlaybackQuality().totalVideoFrames,
              presented,
              colours: colours.size,
              ready: video.readyState,
            });
          }, 500);
        }, { once: true });
        video.currentTime = 5;
    ";
    let result = browser.execute_async(seek, Vec::new()).await.unwrap();
    println!("after the seek: {result}");
    assert!(result.get("error").is_none(), "{result}");
    let time = result["time"].as_f64().unwrap();
    assert!(
        (time - 5.0).abs() < 0.1,
        "currentTime {time} after seeking to 5"
    );
    assert!(result["ready"].as_u64().unwrap() >= 2, "{result}");
    assert!(
        result["frames"].as_u64().unwrap() > 0,
        "no frame decoded: {result}"
    );
    assert!(
        result["colours"].as_u64().unwrap() > 16,
        "the frame drawn at 5 s is blank: {result}"
    );

    // What the gateway was asked for the video, and what it answered.
    let seen: Vec<Seen> = proxy
        .seen()
        .into_iter()
        .filter(|seen| seen.path == "/files/clip.webm" && seen.method == "GET")
        .collect();
    println!("the video's requests at the gateway: {seen:#?}");
    assert!(!seen.is_empty(), "the player fetched nothing");
    for request in &seen {
        assert!(
            request.range.is_some(),
            "the player asked without a range: {request:?}"
        );
        // 304: the player revalidating bytes it already holds.
        assert!(
            request.status == 206 || request.status == 304,
            "{request:?}"
        );
    }
    assert!(
        seen.iter().any(|request| request.status == 206
            && request
                .range
                .as_deref()
                .is_some_and(|range| !range.starts_with("bytes=0-"))),
        "no range from inside the file was served: {seen:?}"
    );

    // Escape closes the player, which lets go of the video.
    browser
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E00C}")
        .await
        .unwrap();
    // (The dialog's close event, which removes the player, comes a task
    // after `open` turns false.)
    eventually("the player to close and go", || async {
        eval(
            &browser,
            "return !document.getElementById('preview').open && !document.querySelector('#preview video')",
        )
        .await
            == json!(true)
    })
    .await;

    browser.close().await.unwrap();
    drop(proxy);
    server.stop().await;
}

/// The centre of the element `css` in viewport pixels.
async fn centre(browser: &Client, css: &str) -> (f64, f64) {
    let at = browser
        .execute(
            "const box = document.querySelector(arguments[0]).getBoundingClientRect();
             return [Math.round(box.x + box.width / 2), Math.round(box.y + box.height / 2)]",
            vec![json!(css)],
        )
        .await
        .unwrap();
    (at[0].as_f64().unwrap(), at[1].as_f64().unwrap())
}

/// Drag the element `from` onto `to` with the mouse, in small steps as a
/// hand would: WebDriver pointer actions, from which Chromium makes the
/// page's dragstart, dragover and drop events itself.
async fn drag(browser: &Client, from: &str, to: &str) {
    let ((from_x, from_y), (to_x, to_y)) = (centre(browser, from).await, centre(browser, to).await);
    let mut mouse = MouseActions::new("mouse".into())
        .then(PointerAction::MoveTo {
            duration: None,
            x: from_x,
            y: from_y,
        })
        .then(PointerAction::Down {
            button: MOUSE_BUTTON_LEFT,
        });
    for step in 1..=10 {
        let part = f64::from(step) / 10.0;
        mouse = mouse.then(PointerAction::MoveTo {
            duration: Some(Duration::from_millis(50)),
            x: (from_x + (to_x - from_x) * part + 3.0).round(),
            y: (from_y + (to_y - from_y) * part).round(),
        });
    }
    // Chromium fires dragover (and so allows the drop) on a move within
    // the target: settle on it with two small ones.
    for nudge in [0.0, 1.0] {
        mouse = mouse.then(PointerAction::MoveTo {
            duration: Some(Duration::from_millis(50)),
            x: to_x + nudge,
            y: to_y,
        });
    }
    let mouse = mouse
        .then(PointerAction::Pause {
            duration: Duration::from_millis(200),
        })
        .then(PointerAction::Up {
            button: MOUSE_BUTTON_LEFT,
        });
    browser.perform_actions(mouse).await.unwrap();
}

async fn sign_in(browser: &Client, name: &str, password: &str) {
    eventually("the sign-in form", || shown(browser, "signin")).await;
    for (id, text) in [("signin-name", name), ("signin-password", password)] {
        let field = browser.find(Locator::Id(id)).await.unwrap();
        field.send_keys(text).await.unwrap();
    }
    click(browser, "#signin-submit").await;
    eventually("the files after signing in", || {
        shown(browser, "files-title")
    })
    .await;
}

async fn click(browser: &Client, css: &str) {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|error| panic!("no {css}: {error}"))
        .click()
        .await
        .unwrap();
}

/// Whether an element matches `css`.
async fn present(browser: &Client, css: &str) -> bool {
    browser.find(Locator::Css(css)).await.is_ok()
}

/// The `value` of the input `css`.
async fn value_of(browser: &Client, css: &str) -> String {
    browser
        .find(Locator::Css(css))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default()
}

/// `PUT /files/{path}` with a bearer token.
async fn put_as(server: &TestServer, token: &str, path: &str, body: Vec<u8>) {
    let response = server
        .client
        .put(server.url(&format!("/files/{path}")))
        .bearer_auth(token)
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "PUT {path}: {response:?}");
}

/// `GET /files/{path}` with a bearer token: the status, and the body if 200.
async fn get_as(server: &TestServer, token: &str, path: &str) -> (u16, Vec<u8>) {
    let response = server
        .client
        .get(server.url(&format!("/files/{path}")))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// The expiry a share link's token carries (`ID.EXPIRES_MS.SIGNATURE`,
/// 0 for never).
fn link_expiry_ms(link: &str) -> i64 {
    let token = link.rsplit('/').next().unwrap();
    token.split('.').nth(1).unwrap().parse().unwrap()
}

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A signed-in user (a session cookie, the CSRF token on every write):
/// previews a text file by a range, shares a link that expires in an hour
/// and one that never does (fetched by a client with no credentials, then
/// revoked), renames a file in place (and is told why not when the name is
/// taken), and moves files by dragging them onto a folder, the parent row
/// and the breadcrumb: WebDAV MOVE under `/dav/`, which takes the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_shares_renames_and_moves_as_a_signed_in_user_in_chromium() {
    const PASSWORD: &str = "correct horse battery staple";
    let server = TestServer::start(|_| {}).await;
    server.add_user("alice", PASSWORD, false, None).await;
    let token = server.create_token("alice").await;
    let notes = b"remember the milk\n".to_vec();
    let long: Vec<u8> = (0..40_000)
        .flat_map(|line| format!("line {line:05}\n").into_bytes())
        .collect();
    assert!(long.len() > 256 * 1024);
    let photo = random_bytes(2_000);
    put_as(&server, &token, "notes.txt", notes.clone()).await;
    put_as(&server, &token, "long.txt", long.clone()).await;
    put_as(&server, &token, "photo.bin", photo.clone()).await;
    // A 1×1 PNG; its type is sniffed on upload.
    let dot = hex::decode(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000\
         1f15c4890000000d4944415478da636460f85f0f0002870180eb47ba92\
         0000000049454e44ae426082",
    )
    .unwrap();
    put_as(&server, &token, "dot.png", dot).await;
    let made = server
        .client
        .post(server.url("/files/archive/?folder"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(made.status().is_success());

    let scratch = tempfile::tempdir().unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&server.url("/")).await.unwrap();
    sign_in(&browser, "alice", PASSWORD).await;
    eventually("the files", || {
        present(&browser, "tr[data-path=\"long.txt\"]")
    })
    .await;

    // Preview a text file: the first 256 KiB, by a range request.
    click(&browser, "tr[data-path=\"long.txt\"] td.name button").await;
    eventually("the text preview", || async {
        eval(
            &browser,
            "const pre = document.querySelector('#preview pre'); return !!pre && pre.textContent !== 'Loading…'",
        )
        .await
            == json!(true)
    })
    .await;
    let text = eval(
        &browser,
        "return document.querySelector('#preview pre').textContent",
    )
    .await;
    assert_eq!(text.as_str().unwrap().as_bytes(), &long[..256 * 1024]);
    assert!(
        text_of(&browser, "preview-note")
            .await
            .contains("the first 256 KiB of"),
        "{}",
        text_of(&browser, "preview-note").await
    );
    click(&browser, "#preview-close").await;
    assert_eq!(
        eval(&browser, "return document.getElementById('preview').open").await,
        json!(false)
    );

    // An image, in an img that the session cookie fetches.
    click(&browser, "tr[data-path=\"dot.png\"] td.name button").await;
    eventually("the image", || async {
        eval(
            &browser,
            "const img = document.querySelector('#preview img'); return !!img && img.complete && img.naturalWidth",
        )
        .await
            == json!(1)
    })
    .await;
    click(&browser, "#preview-close").await;

    // Share notes.txt for an hour.
    click(&browser, "button[aria-label='Share a link to notes.txt']").await;
    browser
        .find(Locator::Id("share-expiry"))
        .await
        .unwrap()
        .select_by_value("3600")
        .await
        .unwrap();
    click(&browser, "#share-create").await;
    eventually("the share link", || async {
        !value_of(&browser, "#share-url").await.is_empty()
    })
    .await;
    let link = value_of(&browser, "#share-url").await;
    assert!(
        link.starts_with(&server.url("/share/")),
        "an absolute link: {link}"
    );
    let expires = link_expiry_ms(&link);
    assert!(
        (expires - (now_ms() + 3_600_000)).abs() < 120_000,
        "the link expires in an hour: {expires} (now {})",
        now_ms()
    );
    assert!(text_of(&browser, "share-expires").await.contains("1 hour"));
    let anyone = reqwest::Client::new();
    let fetched = anyone.get(&link).send().await.unwrap();
    assert_eq!(fetched.status(), reqwest::StatusCode::OK);
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), notes);
    // Copied, or (no clipboard for a headless page) selected for the user to copy.
    click(&browser, "#share-copy").await;
    eventually("the copy's note", || async {
        !text_of(&browser, "share-copied").await.is_empty()
    })
    .await;

    // And one that never expires; then revoked.
    browser
        .find(Locator::Id("share-expiry"))
        .await
        .unwrap()
        .select_by_value("")
        .await
        .unwrap();
    click(&browser, "#share-create").await;
    eventually("the second link", || async {
        let now = value_of(&browser, "#share-url").await;
        !now.is_empty() && now != link
    })
    .await;
    let forever = value_of(&browser, "#share-url").await;
    assert_eq!(link_expiry_ms(&forever), 0, "{forever}");
    assert!(
        text_of(&browser, "share-expires")
            .await
            .contains("does not expire")
    );
    let fetched = anyone.get(&forever).send().await.unwrap();
    assert_eq!(fetched.bytes().await.unwrap().to_vec(), notes);
    click(&browser, "#share-revoke").await;
    eventually("the revocation", || async {
        text_of(&browser, "share-copied").await.contains("Revoked")
    })
    .await;
    assert_eq!(
        anyone.get(&forever).send().await.unwrap().status(),
        reqwest::StatusCode::NOT_FOUND
    );
    assert_eq!(
        anyone.get(&link).send().await.unwrap().status(),
        reqwest::StatusCode::OK,
        "the other link still works"
    );
    click(&browser, "#share-dialog form[method=dialog] button").await;

    // Rename in place.
    click(&browser, "button[aria-label='Rename or move notes.txt']").await;
    let field = browser
        .find(Locator::Css(
            "tr[data-path=\"notes.txt\"] input.rename-input",
        ))
        .await
        .unwrap();
    field.clear().await.unwrap();
    field.send_keys("todo.txt\u{E007}").await.unwrap();
    eventually("the renamed row", || {
        present(&browser, "tr[data-path=\"todo.txt\"]")
    })
    .await;
    assert!(!present(&browser, "tr[data-path=\"notes.txt\"]").await);
    assert_eq!(get_as(&server, &token, "notes.txt").await.0, 404);
    assert_eq!(
        get_as(&server, &token, "todo.txt").await,
        (200, notes.clone())
    );

    // A name already taken: refused (Overwrite: F), and the page says why.
    click(&browser, "button[aria-label='Rename or move todo.txt']").await;
    let field = browser
        .find(Locator::Css(
            "tr[data-path=\"todo.txt\"] input.rename-input",
        ))
        .await
        .unwrap();
    field.clear().await.unwrap();
    field.send_keys("long.txt\u{E007}").await.unwrap();
    eventually("the refusal", || async {
        text_of(&browser, "listing-status")
            .await
            .contains("long.txt already exists")
    })
    .await;
    assert_eq!(
        get_as(&server, &token, "long.txt").await,
        (200, long.clone())
    );
    assert_eq!(
        get_as(&server, &token, "todo.txt").await,
        (200, notes.clone())
    );
    field.send_keys("\u{E00C}").await.unwrap();
    eventually("the rename to be cancelled", || async {
        !present(&browser, "input.rename-input").await
    })
    .await;

    // Drag two files onto the folder's row.
    for name in ["todo.txt", "photo.bin"] {
        drag(
            &browser,
            &format!("tr[data-path=\"{name}\"] td:nth-child(3)"),
            "tr[data-path=\"archive/\"] td:nth-child(3)",
        )
        .await;
        eventually("the moved row to go", || async {
            !present(&browser, &format!("tr[data-path=\"{name}\"]")).await
        })
        .await;
    }
    assert_eq!(get_as(&server, &token, "todo.txt").await.0, 404);
    assert_eq!(
        get_as(&server, &token, "archive/todo.txt").await,
        (200, notes.clone())
    );
    assert_eq!(
        get_as(&server, &token, "archive/photo.bin").await,
        (200, photo.clone())
    );

    // Into the folder, and back out: onto the parent row, onto the breadcrumb.
    browser
        .find(Locator::LinkText("archive/"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the folder's files", || {
        present(&browser, "tr[data-path=\"archive/photo.bin\"]")
    })
    .await;
    drag(
        &browser,
        "tr[data-path=\"archive/photo.bin\"] td:nth-child(3)",
        "tr.up td.name",
    )
    .await;
    eventually("photo.bin to leave", || async {
        !present(&browser, "tr[data-path=\"archive/photo.bin\"]").await
    })
    .await;
    assert_eq!(
        get_as(&server, &token, "photo.bin").await,
        (200, photo.clone())
    );
    drag(
        &browser,
        "tr[data-path=\"archive/todo.txt\"] td:nth-child(3)",
        "#crumbs a[href='#']",
    )
    .await;
    eventually("todo.txt to leave", || async {
        !present(&browser, "tr[data-path=\"archive/todo.txt\"]").await
    })
    .await;
    assert_eq!(get_as(&server, &token, "todo.txt").await, (200, notes));
    assert_eq!(get_as(&server, &token, "archive/todo.txt").await.0, 404);
    assert!(
        text_of(&browser, "listing-status")
            .await
            .contains("Moved archive/todo.txt to the root")
    );

    // The keyboard's way to move: a new name from the root.
    click(&browser, "#crumbs a[href='#']").await;
    eventually("the root's files", || {
        present(&browser, "tr[data-path=\"photo.bin\"]")
    })
    .await;
    click(&browser, "button[aria-label='Rename or move photo.bin']").await;
    let field = browser
        .find(Locator::Css(
            "tr[data-path=\"photo.bin\"] input.rename-input",
        ))
        .await
        .unwrap();
    field.clear().await.unwrap();
    field.send_keys("/archive/pic.bin\u{E007}").await.unwrap();
    eventually("photo.bin to move", || async {
        !present(&browser, "tr[data-path=\"photo.bin\"]").await
    })
    .await;
    assert_eq!(
        get_as(&server, &token, "archive/pic.bin").await,
        (200, photo)
    );

    browser.close().await.unwrap();
    server.stop().await;
}

/// Sorting by size both ways (folders stay first), a large file's download
/// with progress, and ticking several entries (a folder among them) to
/// delete them at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorts_selects_deletes_and_downloads_with_progress_in_chromium() {
    let server = TestServer::start(|_| {}).await;
    let big = random_bytes(16 * 1024 * 1024 + 1);
    for (path, body) in [
        ("b-medium.bin", random_bytes(5_000)),
        ("a-large.bin", random_bytes(90_000)),
        ("c-small.bin", random_bytes(10)),
        ("big.bin", big.clone()),
        ("zeta/inner.txt", b"z".to_vec()),
        ("alpha/inner.txt", b"a".to_vec()),
    ] {
        assert!(server.put(path, body).await.status().is_success());
    }

    let scratch = tempfile::tempdir().unwrap();
    let downloads = scratch.path().join("downloads");
    std::fs::create_dir_all(&downloads).unwrap();
    let driver = Driver::start().await;
    let browser = driver
        .browser(&scratch.path().join("profile"), Some(&downloads))
        .await;
    browser.goto(&server.url("/")).await.unwrap();
    eventually("the listing", || async {
        listed_paths(&browser).await.len() == 6
    })
    .await;
    assert_eq!(
        listed_paths(&browser).await,
        [
            "alpha/",
            "zeta/",
            "a-large.bin",
            "b-medium.bin",
            "big.bin",
            "c-small.bin"
        ],
        "by name, folders first"
    );

    click(&browser, "button.sort[data-key='size']").await;
    assert_eq!(
        listed_paths(&browser).await,
        [
            "alpha/",
            "zeta/",
            "c-small.bin",
            "b-medium.bin",
            "a-large.bin",
            "big.bin"
        ]
    );
    let size_header = browser
        .find(Locator::Css("th[data-key='size']"))
        .await
        .unwrap();
    assert_eq!(
        size_header.attr("aria-sort").await.unwrap().as_deref(),
        Some("ascending")
    );
    click(&browser, "button.sort[data-key='size']").await;
    assert_eq!(
        listed_paths(&browser).await,
        [
            "zeta/",
            "alpha/",
            "big.bin",
            "a-large.bin",
            "b-medium.bin",
            "c-small.bin"
        ]
    );
    assert_eq!(
        size_header.attr("aria-sort").await.unwrap().as_deref(),
        Some("descending")
    );

    // Over 16 MiB: fetched by the page with a progress bar, then saved.
    click(
        &browser,
        "tr[data-path=\"big.bin\"] button[aria-label^='Download big.bin']",
    )
    .await;
    eventually("the download with progress", || async {
        downloaded(&downloads, "big.bin").is_some()
            && text_of(&browser, "downloads")
                .await
                .contains("downloaded big.bin")
    })
    .await;
    let fetched = std::fs::read(downloaded(&downloads, "big.bin").unwrap()).unwrap();
    assert!(fetched == big, "the downloaded bytes differ");

    // Tick two files and a folder; delete them together.
    for name in ["c-small.bin", "a-large.bin", "zeta/"] {
        click(&browser, &format!("input[aria-label='Select {name}']")).await;
    }
    assert_eq!(text_of(&browser, "selection-note").await, "3 selected");
    assert_eq!(
        eval(
            &browser,
            "return document.getElementById('select-all').indeterminate"
        )
        .await,
        json!(true)
    );
    click(&browser, "#delete-selected").await;
    browser.accept_alert().await.unwrap();
    eventually("the deleted rows to go", || async {
        listed_paths(&browser).await == ["alpha/", "big.bin", "b-medium.bin"]
    })
    .await;
    for gone in ["c-small.bin", "a-large.bin", "zeta/inner.txt"] {
        assert_eq!(
            server.get(gone).await.status(),
            reqwest::StatusCode::NOT_FOUND,
            "{gone}"
        );
    }
    for kept in ["b-medium.bin", "big.bin", "alpha/inner.txt"] {
        assert_eq!(
            server.get(kept).await.status(),
            reqwest::StatusCode::OK,
            "{kept}"
        );
    }
    assert_eq!(text_of(&browser, "selection-note").await, "");

    // Select all, then none.
    click(&browser, "#select-all").await;
    assert_eq!(text_of(&browser, "selection-note").await, "3 selected");
    click(&browser, "#select-all").await;
    assert_eq!(text_of(&browser, "selection-note").await, "");

    browser.close().await.unwrap();
    server.stop().await;
}

/// The page's tus chunk size (`TUS_CHUNK` in index.html).
const TUS_CHUNK: u64 = 8 * 1024 * 1024;

/// Wait until `ready` holds, polling, or fail after `seconds`.
async fn eventually_within<F, Fut>(seconds: u64, what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = Instant::now() + Duration::from_secs(seconds);
    while !ready().await {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A file of `len` random bytes at `path`, written a MiB at a time; its
/// SHA-256.
fn random_file(path: &Path, len: u64) -> String {
    use sha2::Digest as _;
    use std::io::Write as _;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut hasher = sha2::Sha256::new();
    let mut left = len;
    while left > 0 {
        let block = random_bytes(usize::try_from(left.min(1 << 20)).unwrap());
        hasher.update(&block);
        file.write_all(&block).unwrap();
        left -= block.len() as u64;
    }
    file.into_inner().unwrap().sync_all().unwrap();
    hex::encode(hasher.finalize())
}

/// The tus requests the proxy passed on: (POSTs creating an upload, the
/// PATCHes as seen).
fn tus_traffic(seen: &[Seen]) -> (usize, Vec<Seen>) {
    let posts = seen
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/uploads/")
        .count();
    let patches = seen
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.starts_with("/uploads/"))
        .cloned()
        .collect();
    (posts, patches)
}

/// The PATCHes the gateway accepted (204), and what it kept of those cut
/// off, carried the file in order: an accepted PATCH starts where the last
/// one ended, or no further than one chunk past it (what the server's
/// checkpoint kept of a PATCH cut off from there, which a client's proxy
/// may not see answered); the stored SHA-256 proves the bytes. Returns the
/// bytes re-sent: what all PATCHes passed on to the gateway beyond the
/// file's size.
fn assert_each_byte_stored_once(patches: &[Seen], size: u64) -> u64 {
    let mut next = 0;
    for patch in patches.iter().filter(|p| p.status == 204) {
        let offset = patch.offset.unwrap();
        assert!(
            (next..=next + TUS_CHUNK).contains(&offset),
            "an accepted PATCH starts where the last one (or what was kept of a cut one) \
             ended: {patches:?}"
        );
        let length = patch.length.unwrap();
        assert!(length <= TUS_CHUNK, "chunks of at most 8 MiB: {patch:?}");
        next = offset + length;
    }
    assert_eq!(next, size, "the accepted PATCHes add up to the file");
    let sent: u64 = patches.iter().map(|p| p.forwarded).sum();
    sent.saturating_sub(size)
}

/// The SHA-256 of `GET /files/{path}` (with `token` if given).
async fn stored_sha256(server: &TestServer, token: Option<&str>, path: &str) -> String {
    let mut request = server.client.get(server.url(&format!("/files/{path}")));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK, "GET {path}");
    sha256_hex(&response.bytes().await.unwrap())
}

/// The `data-state` of the page's tus upload line for `path`, if shown.
async fn tus_state(browser: &Client, path: &str) -> Option<String> {
    let state = eval(
        browser,
        &format!(
            "const line = [...document.querySelectorAll('#uploads li.tus')].find((li) => li.dataset.path === {});
             return line ? line.dataset.state || '' : null",
            json!(path)
        ),
    )
    .await;
    state.as_str().map(str::to_owned)
}

/// Issue 23: a 200 MB file uploaded through the page goes with tus in
/// 8 MiB chunks; the gateway is stopped in the middle and a new one started
/// on the same data directory and port; the page retries by itself, asks
/// the new gateway for its offset and goes on from there (one POST, and
/// the accepted PATCHes carry each byte once, the first after the restart
/// starting where the old gateway stopped); the stored file has the
/// file's SHA-256.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_200_mb_upload_through_the_page_survives_a_gateway_restart_in_chromium() {
    const SIZE: u64 = 200_000_000;
    let scratch = tempfile::tempdir().unwrap();
    let data = scratch.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let big = scratch.path().join("film.bin");
    let digest = random_file(&big, SIZE);

    let server = TestServer::start_in(&data, |_| {}).await;
    let addr = server.addr;
    let proxy = RecordingProxy::start(addr).await;
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&proxy.url("/")).await.unwrap();
    eventually("the page", || shown(&browser, "files-title")).await;

    let started = Instant::now();
    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(big.to_str().unwrap()).await.unwrap();
    // Pause and Resume buttons on the upload's line, its progress with
    // speed and time left.
    eventually("the upload's line", || async {
        tus_state(&browser, "film.bin").await.is_some()
    })
    .await;
    assert!(present(&browser, "#uploads li.tus button.tus-pause").await);
    assert!(present(&browser, "#uploads li.tus button.tus-resume").await);
    // Stop the gateway once about 40 % is stored.
    let accepted = |seen: &[Seen]| {
        tus_traffic(seen)
            .1
            .iter()
            .filter(|p| p.status == 204)
            .count()
    };
    eventually_within(180, "10 chunks stored", || async {
        accepted(&proxy.seen()) >= 10
    })
    .await;
    let stats = browser
        .find(Locator::Css("#uploads li.tus .tus-stats"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        stats.contains(" of ") && stats.contains("/s") && stats.contains("left"),
        "progress with speed and time left: {stats:?}"
    );
    let stop_at = Instant::now();
    server.stop().await;
    let before = proxy.seen();
    let stored_before: u64 = tus_traffic(&before)
        .1
        .iter()
        .filter(|p| p.status == 204)
        .filter_map(|p| p.length)
        .sum();
    assert!(
        stored_before < SIZE,
        "the upload was not finished when the gateway stopped"
    );
    // The page notices (a request fails) and says it is retrying, with
    // backoff, while no gateway is there: give it a few seconds of that.
    eventually("the page retrying", || async {
        tus_state(&browser, "film.bin").await.as_deref() == Some("retrying")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let retrying = text_of(&browser, "uploads").await;
    assert!(retrying.contains("retrying in"), "{retrying:?}");
    let server = TestServer::start_in(&data, |config| config.listen = addr).await;
    let restarted = stop_at.elapsed();

    eventually_within(300, "the upload to complete", || async {
        tus_state(&browser, "film.bin").await.as_deref() == Some("done")
    })
    .await;
    let took = started.elapsed();
    eventually("the file in the listing", || async {
        present(&browser, "tr[data-path=\"film.bin\"]").await
    })
    .await;
    let listed = browser
        .find(Locator::Css("tr[data-path=\"film.bin\"]"))
        .await
        .unwrap();
    assert_eq!(
        listed.attr("data-sha256").await.unwrap().as_deref(),
        Some(digest.as_str())
    );
    assert_eq!(stored_sha256(&server, None, "film.bin").await, digest);

    let seen = proxy.seen();
    let (posts, patches) = tus_traffic(&seen);
    assert_eq!(posts, 1, "one upload created: the page did not start over");
    let resent = assert_each_byte_stored_once(&patches, SIZE);
    let after: Vec<&Seen> = seen[before.len()..]
        .iter()
        .filter(|s| s.method == "PATCH" && s.status == 204)
        .collect();
    // The old gateway's offset: what its 204s said, and what it kept of a
    // PATCH cut off by the stop (at most that chunk).
    let went_on = after.first().and_then(|p| p.offset).unwrap();
    assert!(
        (stored_before..=stored_before + TUS_CHUNK).contains(&went_on),
        "after the restart the page went on from the old gateway's offset: {went_on}, \
         {stored_before} answered"
    );
    assert!(
        seen[before.len()..]
            .iter()
            .any(|s| s.method == "HEAD" && s.path.starts_with("/uploads/") && s.status == 200),
        "the page asked the new gateway for the offset"
    );
    assert!(
        resent <= TUS_CHUNK,
        "at most one chunk re-sent, {resent} bytes were"
    );
    println!(
        "200 MB through the page: {took:?} in all; gateway stopped at {stored_before} bytes and \
         back after {restarted:?}; {resent} bytes re-sent; {} PATCHes ({} accepted)",
        patches.len(),
        patches.iter().filter(|p| p.status == 204).count()
    );

    browser.close().await.unwrap();
    server.stop().await;
    drop(proxy);
}

/// Issue 23: a signed-in user's upload through the page (with the
/// session's CSRF token on every tus request), the page reloaded in the
/// middle: it offers to resume the upload it remembers, with the file's
/// name and how far the server has it; given the same file it goes on
/// from the server's offset and completes; then it remembers nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_mid_upload_offers_to_resume_and_completes_in_chromium() {
    const PASSWORD: &str = "correct horse battery staple";
    const SIZE: u64 = 160 * 1024 * 1024 + 12_345;
    let server = TestServer::start(|_| {}).await;
    server.add_user("alice", PASSWORD, false, None).await;
    let token = server.create_token("alice").await;
    put_as(&server, &token, "videos/keep.txt", b"folder".to_vec()).await;
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("holiday.bin");
    let digest = random_file(&big, SIZE);

    let proxy = RecordingProxy::start(server.addr).await;
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&proxy.url("/#videos%2F")).await.unwrap();
    sign_in(&browser, "alice", PASSWORD).await;
    eventually("the folder", || async {
        listed_paths(&browser)
            .await
            .contains(&"videos/keep.txt".to_owned())
    })
    .await;

    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(big.to_str().unwrap()).await.unwrap();
    let accepted = |seen: &[Seen]| {
        tus_traffic(seen)
            .1
            .iter()
            .filter(|p| p.status == 204)
            .count()
    };
    eventually_within(120, "a chunk stored", || async {
        accepted(&proxy.seen()) >= 1
    })
    .await;
    // Pause: nothing more is stored until Resume.
    click(&browser, "#uploads li.tus button.tus-pause").await;
    assert_eq!(
        tus_state(&browser, "videos/holiday.bin").await.as_deref(),
        Some("paused")
    );
    assert!(present(&browser, "#uploads li.tus button.tus-resume:not([hidden])").await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let paused = accepted(&proxy.seen());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(accepted(&proxy.seen()), paused, "no PATCH while paused");
    assert!((paused as u64) * TUS_CHUNK < SIZE, "paused before the end");
    click(&browser, "#uploads li.tus button.tus-resume").await;
    eventually_within(120, "a chunk stored after Resume", || async {
        accepted(&proxy.seen()) > paused
    })
    .await;
    // Reload: the page goes, with the PATCH in flight.
    browser.refresh().await.unwrap();
    let reloaded = proxy.seen().len();
    eventually("the offer to resume", || async {
        present(&browser, "#uploads li.offer input[type=file]").await
    })
    .await;
    let offer = browser
        .find(Locator::Css("#uploads li.offer"))
        .await
        .unwrap();
    assert_eq!(
        offer.attr("data-path").await.unwrap().as_deref(),
        Some("videos/holiday.bin")
    );
    let label = offer
        .find(Locator::Css("label"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        label.contains("holiday.bin") && label.contains('%'),
        "the offer names the file and its progress: {label:?}"
    );
    let stored_before = tus_traffic(&proxy.seen()[..reloaded])
        .1
        .iter()
        .filter(|p| p.status == 204)
        .filter_map(|p| p.length)
        .sum::<u64>();
    assert!((2 * TUS_CHUNK..SIZE).contains(&stored_before));
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web-page-resume.png");
    std::fs::write(&screenshot, browser.screenshot().await.unwrap()).unwrap();
    // Another file is refused: it is not the one being resumed.
    let other = scratch.path().join("holiday.txt");
    std::fs::write(&other, b"not it").unwrap();
    offer
        .find(Locator::Css("input[type=file]"))
        .await
        .unwrap()
        .send_keys(other.to_str().unwrap())
        .await
        .unwrap();
    eventually("the wrong file refused", || async {
        offer.text().await.unwrap().contains("not the same file")
    })
    .await;
    offer
        .find(Locator::Css("input[type=file]"))
        .await
        .unwrap()
        .send_keys(big.to_str().unwrap())
        .await
        .unwrap();
    eventually_within(120, "the upload to complete", || async {
        tus_state(&browser, "videos/holiday.bin").await.as_deref() == Some("done")
    })
    .await;
    eventually("the file in the listing", || async {
        listed_paths(&browser)
            .await
            .contains(&"videos/holiday.bin".to_owned())
    })
    .await;
    let (status, body) = get_as(&server, &token, "videos/holiday.bin").await;
    assert_eq!(status, 200);
    assert_eq!(sha256_hex(&body), digest);

    let seen = proxy.seen();
    let (posts, patches) = tus_traffic(&seen);
    assert_eq!(posts, 1, "one upload created: the page did not start over");
    let resent = assert_each_byte_stored_once(&patches, SIZE);
    // At most the chunk cut by Pause and the one cut by the reload.
    assert!(resent <= 2 * TUS_CHUNK, "{resent} bytes re-sent");
    let first_after = seen[reloaded..]
        .iter()
        .find(|s| s.method == "PATCH" && s.status == 204)
        .unwrap();
    // The server's offset: what its 204s said, and what it kept of the
    // PATCHes cut off by Pause and by the reload (at most those chunks).
    let went_on = first_after.offset.unwrap();
    assert!(
        (stored_before..=stored_before + 2 * TUS_CHUNK).contains(&went_on),
        "the resumed upload went on from the server's offset: {went_on}, {stored_before} answered"
    );
    // Done: nothing is remembered, nothing offered after another reload.
    let remembered = eval(
        &browser,
        "return Object.keys(localStorage).filter((key) => key.startsWith('tus::')).length",
    )
    .await;
    assert_eq!(remembered, json!(0));
    browser.refresh().await.unwrap();
    eventually("the folder again", || async {
        listed_paths(&browser)
            .await
            .contains(&"videos/holiday.bin".to_owned())
    })
    .await;
    assert!(!present(&browser, "#uploads li.offer").await);
    println!(
        "paused after {paused} chunks, reloaded at {stored_before} bytes; {resent} bytes re-sent"
    );

    browser.close().await.unwrap();
    server.stop().await;
    drop(proxy);
}

/// Issue 23: "Forget" on an offered upload terminates it at the gateway
/// (tus `DELETE`, which frees its bytes) and the browser forgets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_an_offered_upload_terminates_it_in_chromium() {
    const SIZE: u64 = 160 * 1024 * 1024;
    let server = TestServer::start(|_| {}).await;
    let scratch = tempfile::tempdir().unwrap();
    let big = scratch.path().join("draft.bin");
    random_file(&big, SIZE);
    let proxy = RecordingProxy::start(server.addr).await;
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&proxy.url("/")).await.unwrap();
    eventually("the page", || shown(&browser, "files-title")).await;
    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(big.to_str().unwrap()).await.unwrap();
    eventually_within(120, "a chunk stored", || async {
        tus_traffic(&proxy.seen()).1.iter().any(|p| p.status == 204)
    })
    .await;
    browser.refresh().await.unwrap();
    eventually("the offer to resume", || async {
        present(&browser, "#uploads li.offer button.danger").await
    })
    .await;
    let upload = tus_traffic(&proxy.seen()).1[0].path.clone();
    click(&browser, "#uploads li.offer button.danger").await;
    eventually("the DELETE", || async {
        proxy
            .seen()
            .iter()
            .any(|s| s.method == "DELETE" && s.path == upload && s.status == 204)
    })
    .await;
    assert!(!present(&browser, "#uploads li.offer").await);
    let remembered = eval(
        &browser,
        "return Object.keys(localStorage).filter((key) => key.startsWith('tus::')).length",
    )
    .await;
    assert_eq!(remembered, json!(0));
    let head = server
        .client
        .head(server.url(&upload))
        .header("Tus-Resumable", "1.0.0")
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), reqwest::StatusCode::NOT_FOUND);
    assert_eq!(
        server.get("draft.bin").await.status(),
        reqwest::StatusCode::NOT_FOUND
    );

    browser.close().await.unwrap();
    server.stop().await;
    drop(proxy);
}

/// The paths in the trash of the user with `token` (`GET /trash`).
async fn trash_paths(server: &TestServer, token: &str) -> Vec<String> {
    let response = server
        .client
        .get(server.url("/trash"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "GET /trash: {response:?}");
    let trash: serde_json::Value = response.json().await.unwrap();
    trash["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["path"].as_str().unwrap().to_owned())
        .collect()
}

/// Delete the file row `name` through its Delete button, and wait for the
/// row to go.
async fn delete_in_page(browser: &Client, path: &str) {
    let name = path.rsplit('/').next().unwrap_or(path);
    click(
        browser,
        &format!("tr[data-path=\"{path}\"] button[aria-label='Delete {name}']"),
    )
    .await;
    browser.accept_alert().await.unwrap();
    eventually(&format!("{path} to leave the listing"), || async {
        !listed_paths(browser)
            .await
            .iter()
            .any(|listed| listed == path)
    })
    .await;
}

/// Versions and trash in the page (issue 32), as a signed-in user (the
/// session's CSRF token on every write): a file deleted in the page is in
/// the Trash view and reads back byte for byte after Restore; Delete
/// forever and Empty trash leave nothing; an overwritten file's History
/// lists both versions, downloads the first by its id and restores it,
/// byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trash_and_history_restore_byte_for_byte_in_chromium() {
    const PASSWORD: &str = "correct horse battery staple";
    let server = TestServer::start(|_| {}).await;
    server.add_user("alice", PASSWORD, false, None).await;
    let token = server.create_token("alice").await;
    let kept = random_bytes(70_000);
    let first = random_bytes(3_000);
    let second = random_bytes(5_000);
    put_as(&server, &token, "kept.bin", kept.clone()).await;
    put_as(&server, &token, "scratch.txt", b"for the bin\n".to_vec()).await;
    put_as(&server, &token, "draft.bin", first.clone()).await;
    put_as(&server, &token, "draft.bin", second.clone()).await;

    let scratch = tempfile::tempdir().unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&server.url("/")).await.unwrap();
    sign_in(&browser, "alice", PASSWORD).await;
    eventually("the files", || {
        present(&browser, "tr[data-path=\"kept.bin\"]")
    })
    .await;
    let usage = text_of(&browser, "usage").await;
    assert!(
        usage.contains("used (files, earlier versions and trash)"),
        "{usage}"
    );

    // Deleted in the page: in the trash, and back from it byte for byte.
    delete_in_page(&browser, "kept.bin").await;
    assert_eq!(get_as(&server, &token, "kept.bin").await.0, 404);
    click(&browser, "#trash-open").await;
    let in_trash = "#trash-list tr[data-path=\"kept.bin\"]";
    eventually("kept.bin in the trash", || present(&browser, in_trash)).await;
    let deleted = browser
        .find(Locator::Css(in_trash))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(deleted.contains("68.4 KiB"), "{deleted}");
    click(&browser, &format!("{in_trash} button.restore")).await;
    eventually("kept.bin back in the listing", || async {
        listed_paths(&browser)
            .await
            .iter()
            .any(|path| path == "kept.bin")
    })
    .await;
    assert!(!present(&browser, in_trash).await);
    assert_eq!(
        text_of(&browser, "trash-status").await,
        "Restored kept.bin."
    );
    let (status, body) = get_as(&server, &token, "kept.bin").await;
    assert_eq!(status, 200);
    assert!(body == kept, "the restored bytes differ");
    click(&browser, "#trash-dialog .dialog-head button").await;

    // Overwritten twice: the history lists both; restore the first.
    click(
        &browser,
        "tr[data-path=\"draft.bin\"] button[aria-label='History of draft.bin']",
    )
    .await;
    let version_rows = "return [...document.querySelectorAll('#history-list tr[data-version]')]\
         .map((row) => [row.dataset.version, row.dataset.state || '', !!row.querySelector('button.restore')])";
    eventually("two versions listed", || async {
        eval(&browser, version_rows).await.as_array().unwrap().len() == 2
    })
    .await;
    let listed: Vec<(String, String, bool)> =
        serde_json::from_value(eval(&browser, version_rows).await).unwrap();
    assert_eq!(listed[0].1, "current");
    assert!(!listed[0].2, "no Restore on the current version");
    assert_eq!(listed[1].1, "");
    assert!(listed[1].2);
    let oldest = &listed[1].0;
    let history: serde_json::Value = server
        .client
        .get(server.url("/files/draft.bin?versions"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history["versions"][1]["version_id"], json!(oldest));
    assert_eq!(history["versions"][1]["size"], json!(first.len()));
    // The first version's Download link reads it by its id.
    let href = browser
        .find(Locator::Css(&format!(
            "#history-list tr[data-version=\"{oldest}\"] a.download"
        )))
        .await
        .unwrap()
        .prop("href")
        .await
        .unwrap()
        .unwrap();
    let by_id = server
        .client
        .get(&href)
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(by_id.status(), 200, "{href}");
    assert!(by_id.bytes().await.unwrap() == first, "{href} differs");
    click(
        &browser,
        &format!("#history-list tr[data-version=\"{oldest}\"] button.restore"),
    )
    .await;
    eventually("the restore, a third version", || async {
        eval(&browser, version_rows).await.as_array().unwrap().len() == 3
    })
    .await;
    let (status, body) = get_as(&server, &token, "draft.bin").await;
    assert_eq!(status, 200);
    assert!(body == first, "the restored version's bytes differ");
    click(&browser, "#history-dialog .dialog-head button").await;

    // Delete forever one item, then empty the trash of the rest.
    delete_in_page(&browser, "scratch.txt").await;
    delete_in_page(&browser, "kept.bin").await;
    click(&browser, "#trash-open").await;
    eventually("both in the trash", || async {
        present(&browser, "#trash-list tr[data-path=\"scratch.txt\"]").await
            && present(&browser, "#trash-list tr[data-path=\"kept.bin\"]").await
    })
    .await;
    click(
        &browser,
        "#trash-list tr[data-path=\"scratch.txt\"] button.purge",
    )
    .await;
    browser.accept_alert().await.unwrap();
    eventually("scratch.txt gone from the trash view", || async {
        !present(&browser, "#trash-list tr[data-path=\"scratch.txt\"]").await
    })
    .await;
    assert_eq!(trash_paths(&server, &token).await, ["kept.bin"]);
    click(&browser, "#trash-empty").await;
    browser.accept_alert().await.unwrap();
    eventually("the empty trash", || shown(&browser, "trash-empty-note")).await;
    assert!(trash_paths(&server, &token).await.is_empty());
    assert_eq!(get_as(&server, &token, "kept.bin").await.0, 404);
    assert_eq!(get_as(&server, &token, "scratch.txt").await.0, 404);

    browser.close().await.unwrap();
    server.stop().await;
}

/// Object lock in the page (issue 33): a file in a bucket whose default
/// retention holds it shows a padlock with its retain-until date in its
/// History and in the Trash, where Delete forever is disabled with the
/// reason; the server refuses it too, and Restore still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_file_shows_its_padlock_and_cannot_be_deleted_forever_in_chromium() {
    const PASSWORD: &str = "correct horse battery staple";
    let server = TestServer::start(|_| {}).await;
    server.add_user("alice", PASSWORD, false, None).await;
    let token = server.create_token("alice").await;
    let alice = server
        .state
        .auth
        .accounts()
        .user_named("alice")
        .await
        .unwrap()
        .unwrap();
    let owner = volume::Owner::user(alice.id);
    let vault = volume::Prefix::parse("vault/").unwrap();
    server
        .state
        .volume
        .make_folder(owner, &vault)
        .await
        .unwrap();
    let governance = volume::BucketLock {
        default: Some(volume::DefaultRetention {
            mode: volume::LockMode::Governance,
            period: volume::RetentionPeriod::Days(7),
        }),
    };
    server
        .state
        .volume
        .set_bucket_lock(owner, "vault", governance, true)
        .await
        .unwrap();
    let content = random_bytes(4_000);
    put_as(&server, &token, "vault/ledger.bin", content.clone()).await;

    let scratch = tempfile::tempdir().unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&server.url("/#vault/")).await.unwrap();
    sign_in(&browser, "alice", PASSWORD).await;
    eventually("the locked file", || {
        present(&browser, "tr[data-path=\"vault/ledger.bin\"]")
    })
    .await;
    click(
        &browser,
        "tr[data-path=\"vault/ledger.bin\"] button[aria-label='History of ledger.bin']",
    )
    .await;
    eventually("the padlock in the history", || {
        present(&browser, "#history-list tr[data-version] .lock")
    })
    .await;
    let padlock = browser
        .find(Locator::Css("#history-list tr[data-version] .lock"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(padlock.contains("retained (governance) until"), "{padlock}");
    click(&browser, "#history-dialog .dialog-head button").await;

    delete_in_page(&browser, "vault/ledger.bin").await;
    click(&browser, "#trash-open").await;
    let in_trash = "#trash-list tr[data-path=\"vault/ledger.bin\"]";
    eventually("the locked file in the trash", || {
        present(&browser, in_trash)
    })
    .await;
    let purge = browser
        .find(Locator::Css(&format!("{in_trash} button.purge")))
        .await
        .unwrap();
    assert!(
        !purge.is_enabled().await.unwrap(),
        "Delete forever is disabled"
    );
    let why = purge.attr("title").await.unwrap().unwrap_or_default();
    assert!(why.contains("retained (governance) until"), "{why}");
    let row = browser
        .find(Locator::Css(in_trash))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(row.contains("\u{1F512}"), "{row}");
    // The server refuses it whatever the page shows.
    let trash: serde_json::Value = server
        .client
        .get(server.url("/trash"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        trash["items"][0]["lock"]["retain_until"].is_string(),
        "{trash}"
    );
    let id = trash["items"][0]["id"].as_i64().unwrap();
    let refused = server
        .client
        .delete(server.url(&format!("/trash/{id}")))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    // Restore works, byte for byte.
    click(&browser, &format!("{in_trash} button.restore")).await;
    eventually("restored", || async { !present(&browser, in_trash).await }).await;
    let (status, body) = get_as(&server, &token, "vault/ledger.bin").await;
    assert_eq!(status, 200);
    assert!(body == content, "the restored bytes differ");

    browser.close().await.unwrap();
    server.stop().await;
}
