//! The file API end to end: real HTTP against a real gateway, real Wasm
//! instances, a real SQLite file and real blob files.

#![allow(clippy::unwrap_used)]

mod common;

use common::{TestServer, blob_files, blob_location, random_bytes, sha256_hex, stored_blobs};
use gateway::runtime::HandlerKind;
use reqwest::StatusCode;
use reqwest::header;

/// Runs a test of the handler's own semantics (sizes, conditionals, ranges,
/// listings, verification) twice: against the Wasm component, and against
/// the native build of the same logic, the measuring instrument, which must
/// answer exactly as the component does or its figures mean nothing.
macro_rules! both_handlers {
    ($test:ident) => {
        mod $test {
            use super::HandlerKind;

            #[tokio::test]
            async fn wasm() {
                super::$test(HandlerKind::Wasm).await;
            }

            #[tokio::test]
            async fn native() {
                super::$test(HandlerKind::Native).await;
            }
        }
    };
}

both_handlers!(files_of_edge_sizes_round_trip_exactly);
async fn files_of_edge_sizes_round_trip_exactly(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    for size in [0, 1, 65535, 65536, 65537, 1 << 20, 20 << 20] {
        let content = random_bytes(size);
        let expected = sha256_hex(&content);
        let path = format!("sizes/{size}.bin");

        let stored = server.put(&path, content.clone()).await;
        assert_eq!(stored.status(), StatusCode::CREATED, "store {size}");
        let meta: serde_json::Value = stored.json().await.unwrap();
        assert_eq!(meta["sha256"], expected.as_str(), "digest of {size}");
        assert_eq!(meta["size"], size as u64);

        let fetched = server.get(&path).await;
        assert_eq!(fetched.status(), StatusCode::OK);
        let etag = fetched.headers()[header::ETAG].to_str().unwrap().to_owned();
        assert_eq!(etag, format!("\"{expected}\""));
        assert_eq!(
            fetched.headers()[header::CONTENT_LENGTH],
            size.to_string().as_str()
        );
        let body = fetched.bytes().await.unwrap();
        assert_eq!(body.len(), size);
        assert!(body == content, "content of {size} differs");
        assert_eq!(sha256_hex(&body), expected);
    }
    server.stop().await;
}

both_handlers!(metadata_conditional_requests_and_ranges);
async fn metadata_conditional_requests_and_ranges(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    let content: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
    let digest = sha256_hex(&content);
    let stored = server
        .client
        .post(server.url("/files/docs/a.bin"))
        .header(header::CONTENT_TYPE, "application/x-test")
        .body(content.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(stored.status(), StatusCode::CREATED);
    assert_eq!(stored.headers()[header::LOCATION], "/files/docs/a.bin");

    let meta = server.json("/files/docs/a.bin?meta").await;
    assert_eq!(meta["path"], "docs/a.bin");
    assert_eq!(meta["size"], 1000);
    assert_eq!(meta["content_type"], "application/x-test");
    assert_eq!(meta["sha256"], digest.as_str());
    assert!(meta["created"].as_str().unwrap().ends_with('Z'));

    // HEAD: headers only.
    let head = server
        .client
        .head(server.url("/files/docs/a.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(head.status(), StatusCode::OK);
    assert_eq!(head.headers()[header::CONTENT_LENGTH], "1000");
    assert_eq!(head.headers()[header::CONTENT_TYPE], "application/x-test");
    assert!(head.headers().contains_key(header::LAST_MODIFIED));

    // If-None-Match with the current tag: 304, no body.
    let cached = server
        .client
        .get(server.url("/files/docs/a.bin"))
        .header(header::IF_NONE_MATCH, format!("\"{digest}\""))
        .send()
        .await
        .unwrap();
    assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
    let stale = server
        .client
        .get(server.url("/files/docs/a.bin"))
        .header(header::IF_NONE_MATCH, "\"0000\"")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), StatusCode::OK);

    // Ranges: closed, open, suffix, unsatisfiable.
    for (range, first, last) in [
        ("bytes=10-19", 10, 19),
        ("bytes=990-", 990, 999),
        ("bytes=-5", 995, 999),
    ] {
        let partial = server
            .client
            .get(server.url("/files/docs/a.bin"))
            .header(header::RANGE, range)
            .send()
            .await
            .unwrap();
        assert_eq!(partial.status(), StatusCode::PARTIAL_CONTENT, "{range}");
        assert_eq!(
            partial.headers()[header::CONTENT_RANGE],
            format!("bytes {first}-{last}/1000").as_str()
        );
        assert_eq!(partial.bytes().await.unwrap(), &content[first..=last]);
    }
    let outside = server
        .client
        .get(server.url("/files/docs/a.bin"))
        .header(header::RANGE, "bytes=5000-")
        .send()
        .await
        .unwrap();
    assert_eq!(outside.status(), StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(outside.headers()[header::CONTENT_RANGE], "bytes */1000");

    // If-None-Match: * refuses to replace; without it the file is replaced.
    let refused = server
        .client
        .put(server.url("/files/docs/a.bin"))
        .header(header::IF_NONE_MATCH, "*")
        .body("other")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::PRECONDITION_FAILED);
    let error: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(error["error"], "already_exists");
    let replaced = server.put("docs/a.bin", b"other".to_vec()).await;
    assert_eq!(replaced.status(), StatusCode::OK);
    let replaced: serde_json::Value = replaced.json().await.unwrap();
    assert_eq!(replaced["created"], meta["created"]);
    assert_eq!(replaced["content_type"], "text/plain; charset=utf-8");
    assert_eq!(
        server.get("docs/a.bin").await.bytes().await.unwrap(),
        "other"
    );

    // Delete: 204, then 404 for everything.
    assert_eq!(
        server.delete("docs/a.bin").await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        server.delete("docs/a.bin").await.status(),
        StatusCode::NOT_FOUND
    );
    let missing = server.get("docs/a.bin").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let error: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(error["error"], "not_found");
    assert_eq!(error["message"], "no file at docs/a.bin");
    server.stop().await;
}

both_handlers!(listings_show_folders_and_page);
async fn listings_show_folders_and_page(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    for path in [
        "top.txt",
        "photos/a.jpg",
        "photos/b.jpg",
        "photos/2024/c.jpg",
        "zeta/z",
    ] {
        assert!(
            server
                .put(path, path.as_bytes().to_vec())
                .await
                .status()
                .is_success()
        );
    }
    let root = server.json("/files/").await;
    let names: Vec<_> = root["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["photos/", "top.txt", "zeta/"]);
    assert_eq!(root["entries"][0]["type"], "folder");
    assert_eq!(root["entries"][1]["type"], "file");
    assert_eq!(root["entries"][1]["size"], 7);
    assert_eq!(server.json("/files").await["entries"], root["entries"]);

    let photos = server.json("/files/photos/?limit=2").await;
    let names: Vec<_> = photos["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["photos/2024/", "photos/a.jpg"]);
    let after = photos["next_after"].as_str().unwrap();
    let rest = server
        .json(&format!("/files/photos/?limit=2&after={after}"))
        .await;
    let names: Vec<_> = rest["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["path"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["photos/b.jpg"]);
    assert!(rest.get("next_after").is_none());

    let empty = server.json("/files/nothing/here/").await;
    assert_eq!(empty["entries"].as_array().unwrap().len(), 0);
    server.stop().await;
}

both_handlers!(identical_content_is_stored_once_and_freed_with_its_last_file);
async fn identical_content_is_stored_once_and_freed_with_its_last_file(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    let content = random_bytes(100_000);
    assert_eq!(
        server.put("one/copy", content.clone()).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        server.put("two/copy", content.clone()).await.status(),
        StatusCode::CREATED
    );
    let blobs = blob_files(&server.data_dir);
    assert_eq!(blobs.len(), 1);
    assert!(blobs[0].ends_with(sha256_hex(&content)));

    assert_eq!(
        server.delete("one/copy").await.status(),
        StatusCode::NO_CONTENT
    );
    assert_eq!(server.get("two/copy").await.bytes().await.unwrap(), content);
    assert_eq!(blob_files(&server.data_dir).len(), 1);
    assert_eq!(
        server.delete("two/copy").await.status(),
        StatusCode::NO_CONTENT
    );
    // Both are in the trash, which keeps the content until it is emptied.
    assert_eq!(blob_files(&server.data_dir).len(), 1);
    let emptied = server
        .client
        .delete(server.url("/trash"))
        .send()
        .await
        .unwrap();
    assert_eq!(emptied.status(), StatusCode::OK);
    assert!(blob_files(&server.data_dir).is_empty());
    server.stop().await;
}

both_handlers!(a_file_stored_before_outboards_gets_one_on_first_read);
/// A file stored before BLAKE3 trees were kept (its row has a BLAKE3, its
/// blob no outboard) is served verified whole, and that first read gives
/// its blob the outboard, so later ranges stream; the bytes never change.
async fn a_file_stored_before_outboards_gets_one_on_first_read(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    let content = random_bytes(1 << 20);
    let blob = store_as_before_outboards(&server, "old/film.bin", &content).await;

    let whole = server.get("old/film.bin").await;
    assert_eq!(whole.status(), StatusCode::OK);
    assert_eq!(whole.bytes().await.unwrap(), &content[..]);
    // 16 groups of 64 KiB: 8 header bytes and 30 stored nodes of 32 (the
    // root is not stored).
    let mut waited = 0;
    while std::fs::metadata(&blob).unwrap().len() != (1 << 20) + 8 + 30 * 32 {
        let len = std::fs::metadata(&blob).unwrap().len();
        assert!(
            waited < 100,
            "no outboard was kept: the blob is {len} bytes"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        waited += 1;
    }
    let ranged = server
        .client
        .get(server.url("/files/old/film.bin"))
        .header(header::RANGE, "bytes=700000-700099")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(ranged.bytes().await.unwrap(), &content[700_000..700_100]);
    assert_eq!(
        server.get("old/film.bin").await.bytes().await.unwrap(),
        &content[..]
    );
    server.stop().await;
}

/// Store `content` at `path` as files were stored before BLAKE3 trees were
/// kept: its row has a BLAKE3, its blob no outboard. The blob's file.
async fn store_as_before_outboards(
    server: &TestServer,
    path: &str,
    content: &[u8],
) -> std::path::PathBuf {
    let mut staged = server.state.volume.stage();
    staged.write(content).await.unwrap();
    let digests = volume::Digests {
        sha256: volume::Digest::parse(&sha256_hex(content)).unwrap(),
        blake3: Some(volume::Digest::parse(blake3::hash(content).to_hex().as_str()).unwrap()),
    };
    let path = volume::FilePath::parse(path).unwrap();
    server
        .state
        .volume
        .put(
            volume::Owner::OPEN,
            &path,
            staged,
            &digests,
            "video/webm",
            true,
        )
        .await
        .unwrap();
    let blob = blob_files(&server.data_dir)[0].clone();
    assert_eq!(
        std::fs::metadata(&blob).unwrap().len(),
        content.len() as u64
    );
    blob
}

both_handlers!(a_corrupted_file_stored_before_outboards_is_refused_and_gets_none);
/// The first read of such a file hashes it once, for the check and the
/// outboard alike: damaged, it is refused and no outboard is kept.
async fn a_corrupted_file_stored_before_outboards_is_refused_and_gets_none(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    let content = random_bytes(300_000);
    let blob = store_as_before_outboards(&server, "old/damaged.bin", &content).await;
    let file = std::fs::OpenOptions::new().write(true).open(&blob).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, &[content[200_000] ^ 0x01], 200_000).unwrap();

    let fetched = server.get("old/damaged.bin").await;
    assert_eq!(fetched.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let error: serde_json::Value = fetched.json().await.unwrap();
    assert_eq!(error["error"], "integrity_error");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        std::fs::metadata(&blob).unwrap().len(),
        300_000,
        "no outboard is kept for content that failed its check"
    );
    server.stop().await;
}

both_handlers!(a_corrupted_blob_is_refused_on_download);
async fn a_corrupted_blob_is_refused_on_download(handler: HandlerKind) {
    let server = TestServer::start(|config| config.handler = handler).await;
    let content = random_bytes(4096);
    server.put("precious", content.clone()).await;
    // Packed into a segment (4 KiB): its record there is what is damaged.
    let (blob, at) = blob_location(&server.data_dir, &sha256_hex(&content));
    let file = std::fs::OpenOptions::new().write(true).open(&blob).unwrap();
    std::os::unix::fs::FileExt::write_at(&file, &[content[100] ^ 0x01], at + 100).unwrap();

    let fetched = server.get("precious").await;
    assert_eq!(fetched.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let error: serde_json::Value = fetched.json().await.unwrap();
    assert_eq!(error["error"], "integrity_error");
    assert_eq!(
        error["message"],
        "the stored content failed its integrity check"
    );
    // A truncated blob is caught too, and a range request is no way around it.
    file.set_len(at + 10).unwrap();
    let ranged = server
        .client
        .get(server.url("/files/precious"))
        .header(header::RANGE, "bytes=0-3")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), StatusCode::INTERNAL_SERVER_ERROR);
    server.stop().await;
}

#[tokio::test]
async fn bad_paths_get_400() {
    let server = TestServer::start(|_| {}).await;
    let long_name = "n".repeat(256);
    let long_path = vec!["p".repeat(200); 6].join("/");
    let bad = [
        "/files/a/../b".to_owned(),
        "/files/..".to_owned(),
        "/files/a/./b".to_owned(),
        "/files/a//b".to_owned(),
        "/files/%2e%2e/etc/passwd".to_owned(),
        "/files/a%2F..%2Fb".to_owned(),
        "/files/%252e%252e/x".to_owned(),
        "/files/a%5Cb".to_owned(),
        "/files/a%00b".to_owned(),
        "/files/a%0Ab".to_owned(),
        "/files/%ff%fe".to_owned(),
        format!("/files/{long_name}"),
        format!("/files/{long_path}"),
    ];
    for path in &bad {
        for method in ["GET", "PUT", "DELETE"] {
            let status = server
                .raw_status(&format!("{method} {path} HTTP/1.1"))
                .await;
            assert_eq!(status, 400, "{method} {path}");
        }
    }
    // Nothing reached the disk.
    assert!(stored_blobs(&server.data_dir).is_empty());
    // The error body says what was wrong.
    let response = server
        .client
        .get(server.url("/files/a//b"))
        .send()
        .await
        .unwrap();
    let error: serde_json::Value = response.json().await.unwrap();
    assert_eq!(error["error"], "bad_path");
    assert!(error["message"].as_str().unwrap().contains("empty segment"));
    server.stop().await;
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_before_buffering() {
    let server =
        TestServer::start(|config| config.max_body = gateway::config::ByteSize(1 << 20)).await;
    // Declared too large.
    let declared = server.put("big", vec![0; (1 << 20) + 1]).await;
    assert_eq!(declared.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let error: serde_json::Value = declared.json().await.unwrap();
    assert_eq!(error["error"], "body_too_large");
    // Streamed without a length: cut off once it passes the limit.
    let chunks = (0..32).map(|_| Ok::<_, std::io::Error>(vec![7u8; 64 * 1024]));
    let streamed = server
        .client
        .put(server.url("/files/streamed"))
        .body(reqwest::Body::wrap_stream(futures_util::stream::iter(
            chunks,
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(streamed.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Exactly at the limit is fine.
    assert_eq!(
        server.put("exact", vec![1; 1 << 20]).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(server.get("streamed").await.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

#[tokio::test]
async fn a_restarted_gateway_keeps_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut stored = Vec::new();
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    for i in 0..20 {
        let content = random_bytes(1000 * i + 1);
        let path = format!("keep/{i}");
        assert_eq!(
            server.put(&path, content.clone()).await.status(),
            StatusCode::CREATED
        );
        stored.push((path, content));
    }
    server.stop().await;

    let server = TestServer::start_in(dir.path(), |_| {}).await;
    for (path, content) in &stored {
        let fetched = server.get(path).await;
        assert_eq!(fetched.status(), StatusCode::OK, "{path}");
        assert_eq!(&fetched.bytes().await.unwrap()[..], &content[..], "{path}");
    }
    assert_eq!(
        server.json("/files/keep/").await["entries"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
    server.stop().await;
}

#[tokio::test]
async fn empty_folders_are_made_listed_kept_and_deleted_with_their_tree() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    let made = server
        .client
        .post(server.url("/files/projects/empty/?folder"))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    let again = server
        .client
        .post(server.url("/files/projects/empty/?folder"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(
        server
            .put("projects/notes.txt", b"notes".to_vec())
            .await
            .status(),
        StatusCode::CREATED
    );
    server.stop().await;

    // It survives a restart, and lists beside the files.
    let server = TestServer::start_in(dir.path(), |_| {}).await;
    let listing = server.json("/files/projects/").await;
    let entries: Vec<(String, String)> = listing["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("folder".to_owned(), "empty/".to_owned()),
            ("file".to_owned(), "notes.txt".to_owned())
        ]
    );
    // ?folder and ?recursive are for folder paths only: a file name is refused.
    for (method, path) in [
        (reqwest::Method::POST, "/files/projects/notes.txt?folder"),
        (
            reqwest::Method::DELETE,
            "/files/projects/notes.txt?recursive",
        ),
    ] {
        let refused = server
            .client
            .request(method, server.url(path))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{path}");
    }
    assert_eq!(
        server.get("projects/notes.txt").await.status(),
        StatusCode::OK
    );
    // Deleting a folder deletes its tree; without ?recursive it is refused.
    let refused = server
        .client
        .delete(server.url("/files/projects/"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let deleted = server
        .client
        .delete(server.url("/files/projects/?recursive"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        server.get("projects/notes.txt").await.status(),
        StatusCode::NOT_FOUND
    );
    assert!(
        server.json("/files/").await["entries"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let again = server
        .client
        .delete(server.url("/files/projects/?recursive"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::NOT_FOUND);
    server.stop().await;
}

// ---------------------------------------------------------------------------
// If-Range: a resumed download of a replaced file gets the whole new file.

both_handlers!(if_range_sends_the_whole_new_file_for_an_old_validator);
async fn if_range_sends_the_whole_new_file_for_an_old_validator(handler: HandlerKind) {
    use common::{IF_RANGE_NEW, IF_RANGE_OLD, assert_if_range};
    let server = TestServer::start(|config| config.handler = handler).await;
    assert!(
        server
            .put("resume.txt", IF_RANGE_OLD.to_vec())
            .await
            .status()
            .is_success()
    );
    let first = server.get("resume.txt").await;
    let old_etag = first.headers()[header::ETAG].to_str().unwrap().to_owned();
    assert_eq!(old_etag, format!("\"{}\"", sha256_hex(IF_RANGE_OLD)));
    let shared: serde_json::Value = server
        .client
        .post(server.url("/files/resume.txt?share"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let share_url = shared["url"].as_str().unwrap().to_owned();
    assert!(
        server
            .put("resume.txt", IF_RANGE_NEW.to_vec())
            .await
            .status()
            .is_success()
    );
    assert_if_range(
        &server.client,
        &server.url("/files/resume.txt"),
        None,
        &old_etag,
    )
    .await;
    assert_if_range(&server.client, &share_url, None, &old_etag).await;
    server.stop().await;
}
