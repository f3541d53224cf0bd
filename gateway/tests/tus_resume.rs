//! What a tus upload keeps of a request that does not finish (issue 35):
//! the bytes of a PATCH are appended as they arrive and made durable and
//! recorded every few MiB and when the request ends or is cut, so a client
//! that asks where the upload stands (`HEAD`) after a cut resumes from
//! there and does not send again what the server had already kept.
//!
//! Each case runs on both backends: SQLite and a local directory, and
//! PostgreSQL with blobs in SeaweedFS (real servers, started here on
//! loopback ports and stopped by PID). The cases:
//!
//! - a PATCH whose body fails after 7 MiB of 20 keeps some of those 7 MiB
//!   (the offset `HEAD` reports, printed), and the rest sent from there
//!   stores the file with the right SHA-256;
//! - a gateway process killed with SIGKILL in the middle of a slow 20 MiB
//!   PATCH and restarted on the same data directory, database and blob
//!   store keeps some of what was sent, resumes from there, and leaves no
//!   part of the upload behind once it completes;
//! - tus-js-client with its default chunk size (none: the whole file in
//!   one PATCH) aborted at a random point resumes from what the server
//!   kept, sending again no more than what was in flight;
//! - two PATCHes racing from the same offset never both land: one is
//!   stored, the other refused (`409`, `423`) or cut off, and what is
//!   stored is one body's bytes, never a mix; a PATCH at an offset another
//!   has moved past is a `409`.
//!
//! Needs tus-js-client in `.tools/node` with Node on PATH, PostgreSQL and
//! SeaweedFS: `scripts/install-test-deps.sh` installs them.

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::backends::{Backend, BackendKind, GatewayProcess, both_backends, eventually, within};
use common::clients::{Report, run, tus_js_command};
use common::tus::{OFFSET_STREAM, Tus, header_str, header_usize, upload_metadata};
use common::{files_under, random_bytes, sha256_hex, uploads_in_progress};
use rand::Rng;
use reqwest::{Method, RequestBuilder, StatusCode, header};
use serde_json::Value;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// How long a case may take once its backend's servers are up.
const CASE_LIMIT: Duration = Duration::from_secs(60);
/// How long `HEAD` may take to show what a cut request kept.
const SETTLE_LIMIT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------
// The protocol by hand.

/// This file's requests (see [`common::tus`]).
impl Tus {
    /// Creates an upload of `length` bytes for `path`; its absolute URL.
    async fn created(&self, length: usize, path: &str) -> String {
        let answer = self
            .request(Method::POST, &self.endpoint())
            .header("Upload-Length", length.to_string())
            .header("Upload-Metadata", upload_metadata(&[("path", path)]))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::CREATED, "POST for {path}");
        self.location(&answer)
    }

    /// A PATCH at `offset`, its body still to be given.
    fn patch(&self, url: &str, offset: usize) -> RequestBuilder {
        self.request(Method::PATCH, url)
            .header("Upload-Offset", offset.to_string())
            .header(header::CONTENT_TYPE, OFFSET_STREAM)
    }

    /// A PATCH of all of `content` from offset 0, its body paced (see
    /// [`paced_body`]).
    fn paced_patch(
        &self,
        url: &str,
        content: &Bytes,
        piece: usize,
        every: Duration,
        cut_at: Option<usize>,
        sent: Arc<AtomicUsize>,
    ) -> RequestBuilder {
        self.patch(url, 0)
            .header(header::CONTENT_LENGTH, content.len().to_string())
            .body(paced_body(content.clone(), piece, every, cut_at, sent))
    }

    /// Where the upload stands once no request is changing it any more:
    /// polls `HEAD` until it answers the same three times in a row (150 ms
    /// apart), within [`SETTLE_LIMIT`]: `None` once the upload is gone (it
    /// completed), else its offset. With `above_zero`, an offset of 0 does
    /// not count as settled (a cut request may not have recorded yet).
    async fn settled(&self, url: &str, above_zero: bool) -> Option<usize> {
        let started = Instant::now();
        let mut last = None;
        let mut same = 0;
        loop {
            let answer = self.head(url).await;
            let now = match answer.status() {
                StatusCode::NOT_FOUND => None,
                StatusCode::OK => Some(header_usize(answer.headers(), "upload-offset")),
                other => panic!("HEAD {url}: {other}"),
            };
            let counts = !above_zero || now != Some(0);
            if counts && last == Some(now) {
                same += 1;
            } else {
                same = 0;
            }
            if same >= 2 {
                eprintln!(
                    "HEAD {url}: {}, settled after {:?}",
                    now.map_or_else(|| "gone".to_owned(), |offset| format!("offset {offset}")),
                    started.elapsed()
                );
                return now;
            }
            last = Some(now);
            assert!(
                started.elapsed() < SETTLE_LIMIT,
                "HEAD {url}: {now:?} after {SETTLE_LIMIT:?}; it never settled"
            );
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    }

    /// What the server kept of a request that was cut: its offset once
    /// settled above 0 (see [`Tus::settled`]).
    async fn settled_offset(&self, url: &str) -> usize {
        self.settled(url, true)
            .await
            .unwrap_or_else(|| panic!("upload {url} is gone; it was not complete"))
    }

    /// PATCHes `content` from `from` to its end in one request; asserts
    /// the 204 and the offset at the end. A `423` (the upload still busy
    /// with a request that was cut) is tried again, as tus clients do,
    /// for up to 10 s; each is printed.
    async fn finish(&self, url: &str, from: usize, content: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let answer = self
                .patch(url, from)
                .body(content[from..].to_vec())
                .send()
                .await
                .unwrap();
            let status = answer.status();
            if status == StatusCode::LOCKED && Instant::now() < deadline {
                eprintln!("PATCH {url} at {from}: 423, the upload is busy; trying again");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            let headers = answer.headers().clone();
            assert_eq!(
                status,
                StatusCode::NO_CONTENT,
                "PATCH {url} of the rest from {from}: {}",
                answer.text().await.unwrap_or_default()
            );
            assert_eq!(
                header_usize(&headers, "upload-offset"),
                content.len(),
                "the offset after the last PATCH: {headers:?}"
            );
            return;
        }
    }

    /// Asserts `path` is stored with exactly `content`: the body and the
    /// ETag (its SHA-256).
    async fn assert_stored(&self, path: &str, content: &[u8]) {
        let stored = self.stored(path).await;
        assert_eq!(stored.len(), content.len(), "the length of {path}");
        assert_eq!(
            sha256_hex(&stored),
            sha256_hex(content),
            "the SHA-256 of {path}"
        );
    }

    /// The content stored at `path`, checked against its ETag.
    async fn stored(&self, path: &str) -> Bytes {
        let answer = self.file(path).await;
        assert_eq!(answer.status(), StatusCode::OK, "GET /files/{path}");
        let etag = header_str(answer.headers(), "etag")
            .unwrap_or_default()
            .to_owned();
        let body = answer.bytes().await.unwrap();
        assert_eq!(
            etag,
            format!("\"{}\"", sha256_hex(&body)),
            "the ETag of {path} is its content's SHA-256"
        );
        body
    }
}

/// A PATCH body that hands `content` to the connection `piece` bytes at a
/// time, one piece every `every`. With `cut_at`, it fails once that many
/// bytes have gone (after one more pause, so they have left), which aborts
/// the request in the middle of its body: the server sees a cut body.
/// `sent` counts the bytes handed to the connection.
fn paced_body(
    content: Bytes,
    piece: usize,
    every: Duration,
    cut_at: Option<usize>,
    sent: Arc<AtomicUsize>,
) -> reqwest::Body {
    /// The state after the body has failed: nothing more to send.
    const DONE: usize = usize::MAX;
    let stream = futures_util::stream::unfold(0usize, move |at: usize| {
        let content = content.clone();
        let sent = sent.clone();
        async move {
            if at == DONE {
                return None;
            }
            let cut = cut_at.is_some_and(|cut| at >= cut);
            if at >= content.len() && !cut {
                return None;
            }
            if at > 0 {
                tokio::time::sleep(every).await;
            }
            if cut {
                let failed: Result<Bytes, std::io::Error> =
                    Err(std::io::Error::other("the test cuts this PATCH"));
                return Some((failed, DONE));
            }
            let end = (at + piece)
                .min(content.len())
                .min(cut_at.unwrap_or(usize::MAX));
            sent.fetch_add(end - at, Ordering::SeqCst);
            Some((Ok(content.slice(at..end)), end))
        }
    });
    reqwest::Body::wrap_stream(stream)
}

// ---------------------------------------------------------------------------
// 1. A PATCH cut by its client.

both_backends!(a_cut_patch_keeps_what_was_durable);
/// One PATCH of a 20 MiB upload whose body fails after 7 MiB: `HEAD` then
/// reports some of those 7 MiB kept (more than 0, no more than 7 MiB), the
/// rest sent from there in one PATCH completes the upload, and the file
/// has the original's SHA-256.
async fn a_cut_patch_keeps_what_was_durable(kind: BackendKind) {
    const SIZE: usize = 20 * MIB;
    const CUT: usize = 7 * MIB;
    let backend = Backend::start(kind, "tus-cut-patch").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let content = Bytes::from(random_bytes(SIZE));
        let path = "resume/cut.bin";
        let url = tus.created(SIZE, path).await;

        let sent = Arc::new(AtomicUsize::new(0));
        let cut = tus
            .paced_patch(
                &url,
                &content,
                512 * KIB,
                Duration::from_millis(10),
                Some(CUT),
                sent.clone(),
            )
            .send()
            .await;
        match &cut {
            Ok(answer) => assert!(
                !answer.status().is_success(),
                "a PATCH cut at {CUT} of {SIZE} was answered {}",
                answer.status()
            ),
            Err(error) => eprintln!("the cut PATCH failed as meant: {error}"),
        }
        let sent = sent.load(Ordering::SeqCst);
        assert_eq!(sent, CUT, "the body handed over before the cut");

        let kept = tus.settled_offset(&url).await;
        eprintln!("a PATCH cut after {CUT} bytes of {SIZE}: the server kept {kept}");
        assert!(
            kept > 0 && kept <= CUT,
            "the server's offset {kept} after a PATCH cut at {CUT}"
        );
        let head = tus.head(&url).await;
        assert_eq!(header_usize(head.headers(), "upload-length"), SIZE);
        assert_eq!(
            tus.file(path).await.status(),
            StatusCode::NOT_FOUND,
            "a file visible before its last byte"
        );

        tus.finish(&url, kept, &content).await;
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored(path, &content).await;
        server.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 2. A gateway killed in the middle of a PATCH.

both_backends!(a_gateway_killed_mid_patch_keeps_what_was_durable);
/// A gateway process receives a 20 MiB PATCH at 1 MiB every 100 ms and is
/// killed with SIGKILL once the server reports a checkpoint (or 16 MiB
/// went); restarted on the
/// same data directory, database and blob store, it reports some of them
/// kept (more than 0, no more than was sent), the rest from there
/// completes the upload with the right SHA-256, and nothing of the upload
/// is left: no upload in progress, and (local backend) no file under
/// `<data>/blobs/uploads/`.
async fn a_gateway_killed_mid_patch_keeps_what_was_durable(kind: BackendKind) {
    const SIZE: usize = 20 * MIB;
    const KILL_AFTER: usize = 16 * MIB;
    let backend = Backend::start(kind, "tus-killed").await;
    within(CASE_LIMIT, async {
        let scratch = tempfile::tempdir().unwrap();
        let data_dir = scratch.path().join("data");
        let mut gateway =
            GatewayProcess::start(&backend, &data_dir, &scratch.path().join("gateway.log")).await;
        let tus = Tus::new(gateway.addr);
        let content = Bytes::from(random_bytes(SIZE));
        let path = "resume/killed.bin";
        let url = tus.created(SIZE, path).await;

        let sent = Arc::new(AtomicUsize::new(0));
        let patch = tus.paced_patch(
            &url,
            &content,
            MIB,
            Duration::from_millis(250),
            None,
            sent.clone(),
        );
        let patch = tokio::spawn(async move { patch.send().await.map(|answer| answer.status()) });
        // Killed mid-PATCH once the server says it keeps something (a
        // checkpoint: at least every 4 MiB), or once KILL_AFTER bytes went.
        let deadline = Instant::now() + Duration::from_secs(20);
        while sent.load(Ordering::SeqCst) < KILL_AFTER && tus.offset(&url).await == 0 {
            assert!(Instant::now() < deadline, "the PATCH made no progress");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        gateway.kill().await;
        // All the server could have had: what was handed over until it died.
        let sent_by_kill = sent.load(Ordering::SeqCst);
        let answer = tokio::time::timeout(Duration::from_secs(10), patch)
            .await
            .expect("the PATCH still hangs 10 s after the kill")
            .unwrap();
        match answer {
            Ok(status) => assert_ne!(
                status,
                StatusCode::NO_CONTENT,
                "the PATCH completed before the kill; the test's timing is off"
            ),
            Err(error) => eprintln!("the PATCH failed with the gateway: {error}"),
        }

        gateway.restart(&backend).await;
        let kept = tus.offset(&url).await;
        eprintln!(
            "a gateway killed after {sent_by_kill} bytes of a {SIZE}-byte PATCH had been sent: \
             it kept {kept}"
        );
        assert!(
            kept > 0,
            "nothing kept across the kill; the gateway's log:\n{}",
            gateway.log_text()
        );
        assert!(
            kept <= sent_by_kill,
            "offset {kept} but {sent_by_kill} bytes sent"
        );
        assert_eq!(
            tus.file(path).await.status(),
            StatusCode::NOT_FOUND,
            "a file visible before its last byte"
        );

        tus.finish(&url, kept, &content).await;
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored(path, &content).await;
        assert_eq!(gateway.uploads_in_progress().await, 0.0);
        if backend.is_local() {
            // The upload's files go when it completes.
            let uploads = data_dir.join("blobs/uploads");
            let empty = eventually(Duration::from_secs(5), || async {
                files_under(&uploads).is_empty()
            })
            .await;
            assert!(
                empty,
                "files left under {} 5 s after the upload completed: {:?}",
                uploads.display(),
                files_under(&uploads)
            );
        }
        gateway.kill().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 3. tus-js-client with its default chunk size.

/// One run of `tests/tus/tus_js_upload.cjs` (a [`tus_js_command`]), its
/// PATCH bodies paced to `pace` bytes a second if given.
async fn tus_js(mut command: Command, pace: Option<usize>) -> Report {
    match pace {
        Some(rate) => command.env("TUS_JS_PACE", rate.to_string()),
        None => command.env_remove("TUS_JS_PACE"),
    };
    Report::of("tus-js-client", run(command, Duration::from_secs(40)).await)
}

both_backends!(tus_js_client_with_its_default_chunk_size_resumes_without_resending_what_was_kept);
/// tus-js-client under Node uploads 24 MiB with no chunkSize (its default,
/// unlimited: one PATCH), paced to 8 MiB/s, and aborts at a random point
/// between 6 and 18 MiB; a new Upload finds it (findPreviousUploads) and
/// resumes it (resumeFromPreviousUpload). The resume starts past 0, at the
/// server's offset, and what was sent twice is no more than what was in
/// flight at the abort (sent but not kept); the file has the right SHA-256.
async fn tus_js_client_with_its_default_chunk_size_resumes_without_resending_what_was_kept(
    kind: BackendKind,
) {
    const SIZE: usize = 24 * MIB;
    const PACE: usize = 8 * MIB;
    let backend = Backend::start(kind, "tus-js-default").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let scratch = tempfile::tempdir().unwrap();
        let content = random_bytes(SIZE);
        let file = scratch.path().join("js.bin");
        std::fs::write(&file, &content).unwrap();
        let storage = scratch.path().join("tus-urls.json");
        let abort_at = rand::rng().random_range(6 * MIB..18 * MIB);
        eprintln!("abort once {abort_at} bytes are out");
        let command = |mode: &str| {
            tus_js_command(mode, &tus.endpoint(), &file, &storage, "default", abort_at)
        };

        let first = tus_js(command("start"), Some(PACE)).await;
        first.assert_success("tus-js-client's first upload");
        assert!(
            first.json["aborted"].is_u64(),
            "the upload ended before the abort; the test's timing is off: {}",
            first.json
        );
        let aborted = first.u64("aborted") as usize;
        assert!(
            aborted >= abort_at && aborted < SIZE,
            "aborted at {aborted}"
        );
        let patches = first.json["patch_offsets"].as_array().unwrap();
        assert_eq!(
            patches.len(),
            1,
            "one PATCH without a chunkSize: {patches:?}"
        );
        // What left the client in the first run.
        let first_out = (first.u64("sent") as usize).max(aborted);
        let url = first.url();
        let kept = tus.settled_offset(&url).await;
        assert!(
            kept <= first_out,
            "the server's offset {kept}, but {first_out} bytes sent"
        );

        let second = tus_js(command("resume"), None).await;
        second.assert_success("tus-js-client's resumed upload");
        assert!(second.u64("previous") >= 1);
        assert_eq!(second.url(), url, "it resumed the same upload");
        let offsets = second.json["patch_offsets"].as_array().unwrap();
        let start = offsets.first().and_then(Value::as_u64).unwrap() as usize;
        assert!(start > 0, "the resumed upload started at 0: nothing kept");
        assert_eq!(start, kept, "it resumed from the server's offset");
        let second_out = second.u64("sent") as usize;
        let resent = (first_out + second_out).saturating_sub(SIZE);
        let in_flight = first_out - start;
        eprintln!(
            "tus-js-client aborted at {aborted} ({first_out} out), the server kept {kept}, \
             the resume started at {start} with {} PATCHes and sent {second_out}: \
             {resent} bytes sent twice, {in_flight} were in flight",
            offsets.len()
        );
        assert!(
            resent <= in_flight,
            "{resent} bytes sent twice, more than the {in_flight} in flight at the abort"
        );
        assert_eq!(tus.head(&url).await.status(), StatusCode::NOT_FOUND);
        tus.assert_stored("js.bin", &content).await;
        server.stop().await;
    })
    .await;
}

both_backends!(tus_js_client_parallel_uploads_are_joined_into_one_file);
/// tus-js-client with `parallelUploads: 4` (tus's `concatenation`) sends a
/// 24 MiB file as four partial uploads side by side, then the final one
/// that joins them: the file has the right SHA-256, and no upload is left
/// (the partial uploads went with the join).
async fn tus_js_client_parallel_uploads_are_joined_into_one_file(kind: BackendKind) {
    const SIZE: usize = 24 * MIB;
    let backend = Backend::start(kind, "tus-js-parallel").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);
        let scratch = tempfile::tempdir().unwrap();
        let content = random_bytes(SIZE);
        let file = scratch.path().join("js.bin");
        std::fs::write(&file, &content).unwrap();
        let storage = scratch.path().join("tus-urls.json");
        // Aborted never: the upload runs to its end.
        let mut command = tus_js_command(
            "start",
            &tus.endpoint(),
            &file,
            &storage,
            "default",
            SIZE + 1,
        );
        command
            .env("TUS_JS_PARALLEL", "4")
            .env_remove("TUS_JS_PACE");
        let report = Report::of("tus-js-client", run(command, Duration::from_secs(40)).await);
        report.assert_success("tus-js-client's parallel upload");
        let offsets = report.json["patch_offsets"].as_array().unwrap();
        assert!(offsets.len() >= 4, "four partial uploads: {}", report.json);
        tus.assert_stored("js.bin", &content).await;
        assert_eq!(uploads_in_progress(server.addr).await, 0.0);
        server.stop().await;
    })
    .await;
}

// ---------------------------------------------------------------------------
// 4. PATCHes racing from one offset.

/// How a PATCH ended: its status and `Upload-Offset`, or how it failed.
#[derive(Debug)]
enum Outcome {
    Answered(StatusCode, Option<usize>),
    Failed(String),
}

/// Sends each of `bodies` at once as a PATCH at offset 0 of `url`, paced
/// at 2 MiB every 50 ms; how each ended.
async fn race(tus: &Tus, url: &str, bodies: [&Bytes; 2]) -> Vec<Outcome> {
    let patches = bodies.map(|body| {
        let request = tus.paced_patch(
            url,
            body,
            2 * MIB,
            Duration::from_millis(50),
            None,
            Arc::new(AtomicUsize::new(0)),
        );
        async move {
            match request.send().await {
                Ok(answer) => {
                    let offset = header_str(answer.headers(), "upload-offset")
                        .and_then(|offset| offset.parse().ok());
                    Outcome::Answered(answer.status(), offset)
                }
                Err(error) => Outcome::Failed(error.to_string()),
            }
        }
    });
    futures_util::future::join_all(patches).await
}

/// Asserts no two of `outcomes` landed, the one that did (a 204) at
/// `size`, and every other refused (`409`, `423`), cut off, or, once the
/// one that landed had completed the upload, not found; the index of the
/// one that landed.
fn at_most_one_landed(outcomes: &[Outcome], size: usize) -> Option<usize> {
    let landed: Vec<usize> = outcomes
        .iter()
        .enumerate()
        .filter(|(_, outcome)| matches!(outcome, Outcome::Answered(StatusCode::NO_CONTENT, _)))
        .map(|(index, _)| index)
        .collect();
    assert!(landed.len() <= 1, "both PATCHes landed: {outcomes:?}");
    let winner = landed.first().copied();
    for (index, outcome) in outcomes.iter().enumerate() {
        if Some(index) == winner {
            assert!(
                matches!(outcome, Outcome::Answered(_, Some(offset)) if *offset == size),
                "the PATCH that landed did not complete the upload: {outcomes:?}"
            );
            continue;
        }
        match outcome {
            Outcome::Answered(StatusCode::CONFLICT | StatusCode::LOCKED, _) => {}
            Outcome::Failed(why) => eprintln!("PATCH {index} of the race was cut off: {why}"),
            // It came after the other had completed the upload, which is gone.
            Outcome::Answered(StatusCode::NOT_FOUND | StatusCode::GONE, _) if winner.is_some() => {}
            other => panic!("PATCH {index} of the race: {other:?}; all: {outcomes:?}"),
        }
    }
    winner
}

both_backends!(racing_patches_from_one_offset_never_both_land);
/// Two PATCHes of the same 16 MiB sent at once from offset 0, slowly: at
/// most one lands (204, at 16 MiB), the other is refused (409 or 423) or
/// cut off; whatever is left is finished from `HEAD`'s offset and the file
/// has the right SHA-256. Then two bodies alike in their first half only:
/// what is stored is one body's bytes, never a mix. Last, a PATCH at an
/// offset another PATCH has moved past is a 409 and changes nothing.
async fn racing_patches_from_one_offset_never_both_land(kind: BackendKind) {
    const SIZE: usize = 16 * MIB;
    const HALF: usize = SIZE / 2;
    let backend = Backend::start(kind, "tus-race").await;
    within(CASE_LIMIT, async {
        let server = backend.server().await;
        let tus = Tus::new(server.addr);

        // The same bytes twice.
        let same = Bytes::from(random_bytes(SIZE));
        let path = "race/same.bin";
        let url = tus.created(SIZE, path).await;
        let outcomes = race(&tus, &url, [&same, &same]).await;
        eprintln!("the same body twice: {outcomes:?}");
        let winner = at_most_one_landed(&outcomes, SIZE);
        match tus.settled(&url, false).await {
            None => assert!(winner.is_some(), "the upload is gone, yet no PATCH landed"),
            Some(kept) => {
                assert!(winner.is_none(), "a PATCH landed, yet the upload is there");
                eprintln!("no PATCH landed; the server kept {kept}, finishing from there");
                tus.finish(&url, kept, &same).await;
            }
        }
        tus.assert_stored(path, &same).await;

        // Bodies alike in their first half only.
        let mut a = random_bytes(HALF);
        let mut b = a.clone();
        a.extend_from_slice(&random_bytes(SIZE - HALF));
        b.extend_from_slice(&random_bytes(SIZE - HALF));
        let (a, b) = (Bytes::from(a), Bytes::from(b));
        let path = "race/different.bin";
        let url = tus.created(SIZE, path).await;
        let outcomes = race(&tus, &url, [&a, &b]).await;
        eprintln!("bodies alike in their first half: {outcomes:?}");
        let winner = at_most_one_landed(&outcomes, SIZE);
        if let Some(kept) = tus.settled(&url, false).await {
            assert!(winner.is_none(), "a PATCH landed, yet the upload is there");
            eprintln!(
                "no PATCH landed; the server kept {kept}, finishing from there with the first body"
            );
            tus.finish(&url, kept, &a).await;
            let stored = tus.stored(path).await;
            assert_eq!(stored.len(), SIZE);
            assert!(stored[..HALF] == a[..HALF], "the first half, alike in both");
            assert!(
                stored[..kept] == a[..kept] || stored[..kept] == b[..kept],
                "the {kept} bytes kept are neither body's"
            );
            assert!(stored[kept..] == a[kept..], "the rest sent from {kept}");
        } else {
            let winner = winner.expect("the upload is gone, yet no PATCH landed");
            let expected = if winner == 0 { &a } else { &b };
            tus.assert_stored(path, expected).await;
        }

        // A PATCH at an offset another has moved past.
        let content = random_bytes(2 * MIB);
        let path = "race/stale.bin";
        let url = tus.created(content.len(), path).await;
        let answer = tus
            .patch(&url, 0)
            .body(content[..MIB].to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::NO_CONTENT, "the first PATCH");
        assert_eq!(header_usize(answer.headers(), "upload-offset"), MIB);
        let stale = tus
            .patch(&url, 0)
            .body(random_bytes(MIB))
            .send()
            .await
            .unwrap();
        assert_eq!(
            stale.status(),
            StatusCode::CONFLICT,
            "a PATCH at a stale offset"
        );
        assert_eq!(
            tus.offset(&url).await,
            MIB,
            "the stale PATCH changed the offset"
        );
        tus.finish(&url, MIB, &content).await;
        tus.assert_stored(path, &content).await;
        server.stop().await;
    })
    .await;
}
