//! Answers given before a request's body was read (401, 413, 503, …) reach
//! a client that sends its whole body before it reads: Python's
//! `http.client`, Chromium's `fetch`, and a raw socket, over real HTTP on
//! loopback. The server reads and discards the rest of the body for a
//! bounded time (a lingering close) instead of closing on it, which the
//! client would see as a reset or a broken pipe in place of the answer.
//! And the web page retries a 503 after its `Retry-After`, saying so.
//!
//! The Chromium tests need Debian's `chromium` and `chromium-driver`
//! (`.ci/run` installs them).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::TestServer;
use common::browser::Driver;
use fantoccini::Locator;
use gateway::config::ByteSize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const MB: usize = 1_000_000;
const MIB: u64 = 1 << 20;

/// Uploads of `size` bytes from `count` threads of one Python process, each
/// with `http.client`, which sends the whole body and only then reads the
/// answer: one JSON object per upload, its status and `Retry-After`, or the
/// error that ended it.
const PYTHON_BURST: &str = r#"
import http.client, json, os, sys, threading
host, port, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
body = os.urandom(size)
results = [None] * count
def upload(n):
    try:
        connection = http.client.HTTPConnection(host, port, timeout=600)
        connection.request("PUT", f"/files/burst/{n}.bin", body=body)
        response = connection.getresponse()
        response.read()
        results[n] = {"status": response.status, "retry_after": response.getheader("Retry-After")}
        connection.close()
    except Exception as error:
        results[n] = {"error": f"{type(error).__name__}: {error}"}
threads = [threading.Thread(target=upload, args=(n,)) for n in range(count)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps(results))
"#;

/// What the uploads of a burst ended in: stored (201), refused (503 with a
/// `Retry-After`); anything else fails the test with every outcome listed.
fn tally(outcomes: &[Value]) -> (usize, usize) {
    let (mut stored, mut refused) = (0, 0);
    for outcome in outcomes {
        match (outcome["status"].as_u64(), &outcome["retry_after"]) {
            (Some(201), _) => stored += 1,
            (Some(503), Value::String(seconds)) if seconds.parse::<u64>().is_ok() => refused += 1,
            _ => panic!("an upload ended in {outcome}; all of them: {outcomes:?}"),
        }
    }
    (stored, refused)
}

/// A burst of more concurrent 30 MB uploads than the pool serves within
/// the queue's wait: four instances, two seconds. Each one that waits
/// longer is refused before its body is read; the answer still must reach
/// the client that is busy sending that body. The sizes keep what the
/// refused clients send (about 1 GB) well within what the lingering reads
/// take in their 30 s on a loaded two-core machine: with 100 MB each and
/// sixteen instances, how many were refused, and whether their bodies were
/// all sent in time, depended on how fast the stored ones were hashed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_from_python_ends_in_201_or_503_with_retry_after() {
    const UPLOADS: usize = 40;
    let server = TestServer::start(|config| {
        config.instances = 4;
        config.queue_timeout = Duration::from_secs(2);
        config.memory_budget = Some(ByteSize(1 << 30));
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("burst.py");
    std::fs::write(&script, PYTHON_BURST).unwrap();
    let (out, err) = (scratch.path().join("out"), scratch.path().join("err"));
    let started = Instant::now();
    let mut python = Command::new("python3")
        .arg(&script)
        .args([
            "127.0.0.1",
            &server.addr.port().to_string(),
            &UPLOADS.to_string(),
            &(30 * MB).to_string(),
        ])
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = python.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(900) {
            let _ = python.kill();
            let _ = python.wait();
            panic!("the burst did not end within 15 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        status.success(),
        "python3: {}",
        std::fs::read_to_string(&err).unwrap()
    );
    let outcomes: Vec<Value> = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (stored, refused) = tally(&outcomes);
    println!(
        "{UPLOADS} × 30 MB from http.client: {stored} × 201, {refused} × 503 in {:?}",
        started.elapsed()
    );
    assert_eq!(stored + refused, UPLOADS);
    assert!(stored > 0, "some uploads fit the budget");
    assert!(refused > 0, "the burst is larger than the budget holds");
    let pool = server.json("/admin/pool").await;
    assert_eq!(pool["budget_reserved_bytes"], 0, "{pool}");
    server.stop().await;
}

/// A request of `head` and then `body`, written whole before a byte of the
/// answer is read (as a simple client does); the answer's head and body.
async fn send_then_read(stream: &mut TcpStream, head: &str, body: &[u8]) -> (String, String) {
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(body)
        .await
        .expect("the server reads the whole body it answered early");
    read_answer(stream).await
}

/// One answer with a `Content-Length`: its head and its body.
async fn read_answer(stream: &mut TcpStream) -> (String, String) {
    let mut received = Vec::new();
    let mut buffer = [0; 4096];
    loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&received[..end]).into_owned();
            let length: usize = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                let body = String::from_utf8_lossy(&received[end + 4..end + 4 + length]);
                return (head, body.into_owned());
            }
        }
        let read = tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buffer))
            .await
            .expect("an answer within 30 s")
            .expect("an answer, not a reset");
        assert!(read > 0, "closed before a whole answer: {received:?}");
        received.extend_from_slice(&buffer[..read]);
    }
}

/// A 413 for a declared length over `--max-body`, and a 401 for a PUT
/// without credentials, each given before the body is read, reach a client
/// that sends the whole body (larger than the sockets' buffers) first; and
/// the connection serves its next request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_413_and_a_401_reach_a_client_that_sends_its_body_first() {
    let server = TestServer::start(|config| config.max_body = ByteSize(MIB)).await;
    let body = vec![7u8; 32 * MB];
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "PUT /files/too-big.bin HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let (answer, error) = send_then_read(&mut stream, &head, &body).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(error.contains("body_too_large"), "{error}");
    // Kept alive: the body was read to its end.
    let (answer, _) = send_then_read(
        &mut stream,
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
        b"",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    server
        .add_user("alice", "correct horse battery", false, None)
        .await;
    // "Does any user exist" is cached for a second.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let body = &body[..16 * MB];
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "PUT /files/anonymous.bin HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let (answer, _) = send_then_read(&mut stream, &head, body).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    server.stop().await;
}

/// The lingering read is bounded: a client that declared a body and sends
/// none of it is answered, then let go.
#[tokio::test]
async fn a_client_that_stops_sending_is_let_go() {
    let server = TestServer::start(|config| config.max_body = ByteSize(MIB)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head =
        "PUT /files/never.bin HTTP/1.1\r\nHost: localhost\r\nContent-Length: 50000000\r\n\r\n";
    let (answer, _) = send_then_read(&mut stream, head, b"").await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(0))), "closed: {closed:?}, {rest:?}");
    server.stop().await;
}

/// On a connection that closes after the answer, the server ends its side
/// once the answer is out, so a client that reads to the end has the whole
/// answer at once; and it still discards what the client sends after.
#[tokio::test]
async fn a_closing_client_reads_to_the_end_and_may_still_send() {
    let server = TestServer::start(|config| config.max_body = ByteSize(MIB)).await;
    let body = vec![7u8; 32 * MB];
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "PUT /files/late.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), stream.read_to_end(&mut answer))
        .await
        .expect("the end of the answer")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.ends_with('}'), "the whole answer: {answer}");
    // The end came before the server stopped reading: the body still goes.
    stream
        .write_all(&body)
        .await
        .expect("the rest is read and discarded, not reset");
    server.stop().await;
}

/// Poll `ready` until it gives a value, or fail after `limit`.
async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut ready: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let give_up = Instant::now() + limit;
    loop {
        if let Some(value) = ready().await {
            return value;
        }
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The issue's burst from the page's own origin: concurrent `fetch` uploads
/// of 100 MB under a budget that holds two. Every one reads its answer: no
/// `TypeError: Failed to fetch`. (Chromium reads an answer that comes while
/// it sends, even one followed by a reset, so this passes on a server that
/// closes early too; it guards that draining keeps every answer readable and
/// the connections reusable.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_fetch_uploads_in_chromium_ends_in_201_or_503_with_retry_after() {
    const UPLOADS: usize = 12;
    let server = TestServer::start(|config| {
        config.instances = 4;
        config.memory_budget = Some(ByteSize(256 * MIB));
        config.queue_timeout = Duration::from_secs(1);
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&server.url("/")).await.unwrap();
    let started = Instant::now();
    browser
        .execute(
            r#"
            const [count, size] = arguments;
            const body = new Uint8Array(size);
            for (let at = 0; at < size; at += 65536) crypto.getRandomValues(body.subarray(at, at + 65536));
            // One Blob for all, as the page sends one chosen File: twelve
            // distinct 100 MB Blobs fail in Chromium itself ("Failed to
            // fetch" with nothing refused by the server).
            const blob = new Blob([body]);
            window.burst = null;
            Promise.all(Array.from({ length: count }, (_, n) =>
              fetch(`/files/chromium/${n}.bin`, { method: "PUT", body: blob })
                .then((response) => response.text().then(() =>
                  ({ status: response.status, retry_after: response.headers.get("Retry-After") })))
                .catch((error) => ({ error: String(error) }))
            )).then((outcomes) => { window.burst = outcomes; });
            "#,
            vec![json!(UPLOADS), json!(100 * MB)],
        )
        .await
        .unwrap();
    let outcomes = eventually("the burst's answers", Duration::from_secs(600), || async {
        match browser.execute("return window.burst", Vec::new()).await {
            Ok(Value::Array(outcomes)) => Some(outcomes),
            _ => None,
        }
    })
    .await;
    let (stored, refused) = tally(&outcomes);
    println!(
        "{UPLOADS} × 100 MB from fetch: {stored} × 201, {refused} × 503 in {:?}",
        started.elapsed()
    );
    assert_eq!(stored + refused, UPLOADS);
    assert!(stored > 0, "some uploads fit the budget");
    assert!(refused > 0, "the burst is larger than the budget holds");
    browser.close().await.unwrap();
    server.stop().await;
}

/// The page retries an upload refused with 503 after its `Retry-After`, and
/// says so while it waits. The only instance is held by a raw upload whose
/// body is not sent yet; once it is, the page's retry goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_retries_a_503_after_retry_after_and_says_so() {
    let server = TestServer::start(|config| {
        config.instances = 1;
        config.queue_timeout = Duration::from_millis(300);
    })
    .await;
    let mut holder = TcpStream::connect(server.addr).await.unwrap();
    holder
        .write_all(
            b"PUT /files/holder.bin HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n\r\n",
        )
        .await
        .unwrap();
    eventually(
        "the holder to take the instance",
        Duration::from_secs(20),
        || async {
            let pool = server.json("/admin/pool").await;
            (pool["instances"][0]["state"] != "idle").then_some(())
        },
    )
    .await;

    let scratch = tempfile::tempdir().unwrap();
    let content = common::random_bytes(200_000);
    let upload = scratch.path().join("retried.bin");
    std::fs::write(&upload, &content).unwrap();
    let driver = Driver::start().await;
    let browser = driver.browser(&scratch.path().join("profile"), None).await;
    browser.goto(&server.url("/")).await.unwrap();
    let input = browser.find(Locator::Id("file-input")).await.unwrap();
    input.send_keys(upload.to_str().unwrap()).await.unwrap();
    let busy = eventually(
        "the page to say it retries",
        Duration::from_secs(20),
        || async {
            let text = browser
                .find(Locator::Id("uploads"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            text.contains("server busy, retrying in").then_some(text)
        },
    )
    .await;
    assert!(busy.contains("retried.bin"), "{busy}");

    holder.write_all(b"done").await.unwrap();
    let (answer, _) = read_answer(&mut holder).await;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    eventually(
        "the retried upload in the listing",
        Duration::from_secs(60),
        || async {
            browser
                .find(Locator::Css("tr[data-path=\"retried.bin\"]"))
                .await
                .ok()
        },
    )
    .await;
    let stored = server.get("retried.bin").await;
    assert_eq!(stored.bytes().await.unwrap(), content);
    browser.close().await.unwrap();
    server.stop().await;
}
