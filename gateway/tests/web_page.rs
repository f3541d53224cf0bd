//! The web page in a real headless Chromium, driven through ChromeDriver:
//! upload through the file input, see the file listed with its SHA-256,
//! download it through the browser, delete it, and see the pool panel;
//! with users, sign in (a wrong password first), upload, and sign out.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs them).

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::browser::Driver;
use common::{TestServer, random_bytes, sha256_hex};
use fantoccini::{Client, Locator};
use gateway::recycler::Mode;
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
