//! What every area shares: the hostile requests as raw bytes, how an
//! answer is read and judged, and [`Area::check`], which runs one area's
//! cases on a gateway of its own in both modes and then checks that
//! nothing was written.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{TestServer, random_bytes, sha256_hex, stored_blobs};

/// `--max-body` for these tests: small, so that "too large" is cheap to send.
pub(crate) const MAX_BODY: u64 = 64 << 10;
/// alice's quota.
const QUOTA: u64 = 1 << 20;
/// The status recorded when the server closed the connection without a
/// response. Allowed only where hyper legitimately does that.
pub(crate) const CLOSED: u16 = 0;
/// The status recorded when nothing came back within the case's wait.
const NO_ANSWER: u16 = 999;
/// How long a case waits for its answer unless it says otherwise.
const WAIT: Duration = Duration::from_secs(15);
/// The size of `keep/a.txt` in every tree.
pub(crate) const TEXT_SIZE: usize = 1000;

/// One hostile request and what a careful server answers.
pub(crate) struct Case {
    name: String,
    request: Vec<u8>,
    /// Acceptable statuses: the first is the answer this test argues for;
    /// others only where a comment says why.
    expect: Vec<u16>,
    /// The JSON `error` code, checked when the status is `expect[0]`.
    error: Option<&'static str>,
    /// A header (lowercase name) one of whose values must contain this text,
    /// checked when the status is `expect[0]`.
    header: Option<(&'static str, String)>,
    /// Shut down our sending side once the request is out.
    half_close: bool,
    wait: Duration,
}

pub(crate) fn case(name: impl Into<String>, request: impl Into<Vec<u8>>, expect: &[u16]) -> Case {
    Case {
        name: name.into(),
        request: request.into(),
        expect: expect.to_vec(),
        error: None,
        header: None,
        half_close: false,
        wait: WAIT,
    }
}

impl Case {
    pub(crate) fn error(mut self, code: &'static str) -> Self {
        self.error = Some(code);
        self
    }

    pub(crate) fn header(mut self, name: &'static str, contains: impl Into<String>) -> Self {
        self.header = Some((name, contains.into()));
        self
    }

    pub(crate) fn half_close(mut self) -> Self {
        self.half_close = true;
        self
    }

    pub(crate) fn wait(mut self, seconds: u64) -> Self {
        self.wait = Duration::from_secs(seconds);
        self
    }
}

/// A request with `Host`, the credentials line `auth` (empty, or a header
/// line ending in CRLF), `headers` (each ending in CRLF), `Connection:
/// close` and, with a body, its `Content-Length`.
pub(crate) fn request(
    method: &str,
    target: &str,
    auth: &str,
    headers: &str,
    body: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = format!(
        "{method} {target} HTTP/1.1\r\nHost: localhost\r\n{auth}{headers}Connection: close\r\n"
    )
    .into_bytes();
    if let Some(body) = body {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    if let Some(body) = body {
        out.extend_from_slice(body);
    }
    out
}

pub(crate) fn get(target: &str, auth: &str, headers: &str) -> Vec<u8> {
    request("GET", target, auth, headers, None)
}

pub(crate) fn put(target: &str, auth: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    request("PUT", target, auth, headers, Some(body))
}

/// A head whose `headers` frame the body themselves (chunked, a lying or
/// absent length), then `raw_body` as is.
pub(crate) fn framed(
    method: &str,
    target: &str,
    auth: &str,
    headers: &str,
    raw_body: &[u8],
) -> Vec<u8> {
    let mut out = request(method, target, auth, headers, None);
    out.extend_from_slice(raw_body);
    out
}

/// `data` in chunked coding, `piece` bytes a chunk, with its last chunk.
pub(crate) fn chunked(data: &[u8], piece: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in data.chunks(piece) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

pub(crate) fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

pub(crate) fn basic(credentials: &str) -> String {
    format!("Authorization: Basic {}\r\n", BASE64.encode(credentials))
}

pub(crate) fn admin_json(auth: &str, json: &[u8]) -> Vec<u8> {
    put(
        "/admin/estimator",
        auth,
        "Content-Type: application/json\r\n",
        json,
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No user: anonymous requests, the open tree.
    Open,
    /// Users exist: the table's requests carry alice's (files) or root's
    /// (admin) token.
    Users,
}

/// What the cases that run in both modes are given: `user` and `admin`
/// are credential lines (empty in open mode); `text_sha` is the digest of
/// `keep/a.txt` (1000 bytes) in the tree they reach.
pub(crate) struct Phase<'a> {
    pub(crate) mode: Mode,
    pub(crate) user: &'a str,
    pub(crate) admin: &'a str,
    pub(crate) text_sha: &'a str,
}

/// What the account cases need.
pub(crate) struct Accounts {
    pub(crate) alice: String,
    pub(crate) root: String,
    pub(crate) alice_cookie: String,
    pub(crate) alice_csrf: String,
    pub(crate) root_cookie: String,
    pub(crate) root_csrf: String,
    /// A live share token for alice's `keep/a.txt`.
    pub(crate) share: String,
}

/// Text helpers on raw requests.
pub(crate) trait RawRequest {
    fn replace_method(self, method: &str) -> Vec<u8>;
    fn replace_bytes(self, from: &[u8], to: &[u8]) -> Vec<u8>;
}

impl RawRequest for Vec<u8> {
    /// The same request with another method (the first word).
    fn replace_method(self, method: &str) -> Vec<u8> {
        let space = self.iter().position(|&b| b == b' ').unwrap();
        [method.as_bytes(), &self[space..]].concat()
    }

    fn replace_bytes(self, from: &[u8], to: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        let mut rest = &self[..];
        while let Some(at) = rest.windows(from.len()).position(|w| w == from) {
            out.extend_from_slice(&rest[..at]);
            out.extend_from_slice(to);
            rest = &rest[at + from.len()..];
        }
        out.extend_from_slice(rest);
        out
    }
}

/// What came back for one request.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Bytes after the first complete response (a second answer).
    extra: usize,
    /// How the read ended: `eof`, `reset`, `timeout`.
    ended: &'static str,
}

/// Send the case's bytes on a fresh connection (writing and reading at
/// once, so a server that answers early and closes is still heard) and
/// read until the server closes.
async fn send(addr: SocketAddr, case: &Case) -> Answer {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let bytes = case.request.clone();
    let half_close = case.half_close;
    let writing = tokio::spawn(async move {
        // An early answer and close make the rest of the write fail: fine.
        let _ = writer.write_all(&bytes).await;
        if half_close {
            let _ = writer.shutdown().await;
        }
        // Kept until the answer is read: dropping it would half-close.
        writer
    });
    let mut received = Vec::new();
    let mut buffer = vec![0; 64 << 10];
    let deadline = tokio::time::Instant::now() + case.wait;
    let ended = loop {
        match tokio::time::timeout_at(deadline, reader.read(&mut buffer)).await {
            Err(_) => break "timeout",
            Ok(Ok(0)) => break "eof",
            Ok(Ok(n)) => received.extend_from_slice(&buffer[..n]),
            Ok(Err(_)) => break "reset",
        }
    };
    writing.abort();
    let _ = writing.await;
    parse_answer(&received, ended)
}

fn parse_answer(received: &[u8], ended: &'static str) -> Answer {
    let empty = |status| Answer {
        status,
        headers: Vec::new(),
        body: Vec::new(),
        extra: 0,
        ended,
    };
    let Some(head_end) = find(received, b"\r\n\r\n") else {
        return empty(if ended == "timeout" {
            NO_ANSWER
        } else {
            CLOSED
        });
    };
    let head = String::from_utf8_lossy(&received[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(CLOSED);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let value = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let rest = &received[head_end + 4..];
    let (body, extra) = if status == 304 || status == 204 || (100..200).contains(&status) {
        (Vec::new(), rest.len())
    } else if value("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)
    } else if let Some(length) = value("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let length = length.min(rest.len());
        (rest[..length].to_vec(), rest.len() - length)
    } else {
        (rest.to_vec(), 0)
    };
    Answer {
        status,
        headers,
        body,
        extra,
        ended,
    }
}

/// A chunked body and how many bytes follow it.
fn dechunk(mut rest: &[u8]) -> (Vec<u8>, usize) {
    let mut body = Vec::new();
    while let Some(line_end) = find(rest, b"\r\n") {
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        rest = &rest[line_end + 2..];
        if size == 0 {
            // Trailers (none expected), then the blank line.
            let end = find(rest, b"\r\n").map_or(rest.len(), |at| at + 2);
            return (body, rest.len() - end);
        }
        let size = size.min(rest.len());
        body.extend_from_slice(&rest[..size]);
        rest = &rest[(size + 2).min(rest.len())..];
    }
    (body, 0)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Why `answer` is wrong for `case`, if it is.
fn judge(case: &Case, answer: &Answer) -> Option<String> {
    let body = String::from_utf8_lossy(&answer.body[..answer.body.len().min(300)]).into_owned();
    if !case.expect.contains(&answer.status) {
        return Some(format!(
            "got {} (read ended: {}), expected {:?}; body: {body:?}",
            answer.status, answer.ended, case.expect
        ));
    }
    if answer.extra > 0 {
        return Some(format!(
            "{} bytes followed the first response: the connection answered more than one request",
            answer.extra
        ));
    }
    if answer.status != case.expect[0] {
        return None;
    }
    if let Some(code) = case.error {
        let error = serde_json::from_slice::<serde_json::Value>(&answer.body)
            .ok()
            .and_then(|json| json["error"].as_str().map(str::to_owned));
        if error.as_deref() != Some(code) {
            return Some(format!(
                "status {} as expected, but error {error:?} instead of {code:?}; body: {body:?}",
                answer.status
            ));
        }
    }
    if let Some((name, contains)) = &case.header
        && !answer
            .headers
            .iter()
            .any(|(n, v)| n == name && v.contains(contains.as_str()))
    {
        return Some(format!(
            "status {} as expected, but no {name} header containing {contains:?}; headers: {:?}",
            answer.status, answer.headers
        ));
    }
    None
}

/// Send every case; the problems go to `failures`. Returns the count.
async fn run(
    server: &TestServer,
    phase: &str,
    cases: Vec<Case>,
    failures: &mut Vec<String>,
) -> usize {
    let names: BTreeSet<_> = cases.iter().map(|case| case.name.as_str()).collect();
    assert_eq!(names.len(), cases.len(), "case names are unique in {phase}");
    for case in &cases {
        let answer = send(server.addr, case).await;
        if case.expect.len() > 1 {
            println!(
                "[{phase}] {}: {} (read ended: {})",
                case.name, answer.status, answer.ended
            );
        }
        if let Some(problem) = judge(case, &answer) {
            let failure = format!("[{phase}] {}: {problem}", case.name);
            eprintln!("{failure}");
            failures.push(failure);
        }
    }
    cases.len()
}

/// What goes back into a URL from a listed folder path.
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'\\');

/// Every file in the tree `token` reaches (the open tree without one):
/// path -> sha256, by listing folders recursively.
async fn tree(server: &TestServer, token: Option<&str>) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    let mut folders = vec![String::new()];
    while let Some(folder) = folders.pop() {
        let mut after: Option<String> = None;
        loop {
            let mut url = server.url(&format!(
                "/files/{}?limit=1000",
                utf8_percent_encode(&folder, PATH_ESCAPES)
            ));
            if let Some(after) = &after {
                url += &format!("&after={}", utf8_percent_encode(after, PATH_ESCAPES));
            }
            let mut listing = server.client.get(url);
            if let Some(token) = token {
                listing = listing.bearer_auth(token);
            }
            let response = listing.send().await.unwrap();
            assert_eq!(response.status(), 200, "listing {folder:?}");
            let page: serde_json::Value = response.json().await.unwrap();
            for entry in page["entries"].as_array().unwrap() {
                let path = entry["path"].as_str().unwrap().to_owned();
                if entry["type"] == "folder" {
                    folders.push(path);
                } else {
                    files.insert(path, entry["sha256"].as_str().unwrap().to_owned());
                }
            }
            match page["next_after"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
        }
    }
    files
}

/// Store `content` at `path` in the tree `token` reaches; remember its digest.
async fn store(
    server: &TestServer,
    token: Option<&str>,
    path: &str,
    content: Vec<u8>,
    expected: &mut BTreeMap<String, String>,
) {
    let digest = sha256_hex(&content);
    let mut request = server
        .client
        .put(server.url(&format!("/files/{path}")))
        .body(content);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 201, "storing {path}");
    expected.insert(path.to_owned(), digest);
}

/// The estimator settings a hostile PUT could change.
async fn estimator_settings(
    server: &TestServer,
    token: Option<&str>,
) -> BTreeMap<&'static str, serde_json::Value> {
    let mut request = server.client.get(server.url("/admin/estimator"));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let report: serde_json::Value = request.send().await.unwrap().json().await.unwrap();
    [
        "mode",
        "method",
        "alpha",
        "restart_budget",
        "fixed_threshold_bytes",
    ]
    .into_iter()
    .map(|name| (name, report[name].clone()))
    .collect()
}

/// Sign in; the session cookie and its CSRF token.
async fn login(server: &TestServer, name: &str, password: &str) -> (String, String) {
    let response = server
        .client
        .post(server.url("/auth/login"))
        .json(&serde_json::json!({ "name": name, "password": password }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "signing in as {name}");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .strip_prefix("wst_session=")
        .unwrap()
        .to_owned();
    let body: serde_json::Value = response.json().await.unwrap();
    (cookie, body["csrf"].as_str().unwrap().to_owned())
}

/// Record how `got` differs from `want` (the test goes on, so that one
/// run shows every problem).
fn same<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
    what: &str,
    got: &BTreeMap<K, V>,
    want: &BTreeMap<K, V>,
    failures: &mut Vec<String>,
) {
    let mut differences = Vec::new();
    for (key, value) in got {
        match want.get(key) {
            None => differences.push(format!("unexpected {key:?} = {value:?}")),
            Some(wanted) if wanted != value => {
                differences.push(format!("{key:?} is {value:?}, not {wanted:?}"));
            }
            Some(_) => {}
        }
    }
    for key in want.keys().filter(|key| !got.contains_key(key)) {
        differences.push(format!("missing {key:?}"));
    }
    if !differences.is_empty() {
        let failure = format!("[after] {what}: {}", differences.join("; "));
        eprintln!("{failure}");
        failures.push(failure);
    }
}

/// A set as a map, for [`same`].
fn as_map<T: Ord>(set: BTreeSet<T>) -> BTreeMap<T, ()> {
    set.into_iter().map(|item| (item, ())).collect()
}

/// Poll `current` for a few seconds (a failed upload's temp file is removed
/// as its request ends, not necessarily before the answer is sent).
async fn settles<T: PartialEq + std::fmt::Debug>(
    mut current: impl FnMut() -> T,
    expected: &T,
) -> T {
    for _ in 0..50 {
        let now = current();
        if &now == expected {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    current()
}

/// One area of the hostile requests: its cases, and the gateway they run on.
pub(crate) struct Area {
    /// Names the area in every failure and in the count of cases.
    pub(crate) name: &'static str,
    /// The cases that need no account: run in open mode (anonymous, the
    /// open tree), then again with users (alice's or root's token).
    pub(crate) both: fn(&Phase<'_>) -> Vec<Case>,
    /// The cases about accounts: run once users exist, after `both`.
    pub(crate) accounts: fn(&Accounts) -> Vec<Case>,
}

impl Area {
    /// One gateway of the area's own, two phases: open (no user yet:
    /// anonymous requests reach the open tree), then with users `alice`
    /// (1 MiB quota, filled to 13336 bytes short) and `root` (admin), where
    /// `both` runs again authenticated, followed by `accounts`. Then
    /// nothing was written: every tree is what this stored, the share link
    /// and alice's session survive, the settings are unchanged, exactly the
    /// blobs of those files exist and no temp file is left. Every problem is
    /// collected before the one assertion, so one run shows them all.
    pub(crate) async fn check(self) {
        let area = self.name;
        let server = TestServer::start(|config| {
            config.max_body = gateway::config::ByteSize(MAX_BODY);
            config.header_timeout = Duration::from_secs(2);
        })
        .await;
        let mut failures = Vec::new();

        // ---- Open mode: what the test stores on purpose, then the cases.
        let mut open_files = BTreeMap::new();
        let text: Vec<u8> = (0..TEXT_SIZE).map(|i| b'a' + (i % 26) as u8).collect();
        let open_text_sha = sha256_hex(&text);
        store(&server, None, "keep/a.txt", text, &mut open_files).await;
        store(
            &server,
            None,
            "keep/b.bin",
            random_bytes(10_240),
            &mut open_files,
        )
        .await;
        let settings = estimator_settings(&server, None).await;
        let open = Phase {
            mode: Mode::Open,
            user: "",
            admin: "",
            text_sha: &open_text_sha,
        };
        let open_count = run(
            &server,
            &format!("{area}, open"),
            (self.both)(&open),
            &mut failures,
        )
        .await;
        same(
            "the open tree",
            &tree(&server, None).await,
            &open_files,
            &mut failures,
        );
        same(
            "the estimator settings (open)",
            &estimator_settings(&server, None).await,
            &settings,
            &mut failures,
        );

        // ---- Users: alice fills her quota to 13336 bytes short of 1 MiB.
        server
            .add_user("alice", "pw-alice-123", false, Some(QUOTA))
            .await;
        server.add_user("root", "pw-root-123", true, None).await;
        // "Does any user exist" is cached for a second.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        let alice_token = server.create_token("alice").await;
        let root_token = server.create_token("root").await;
        let mut alice_files = BTreeMap::new();
        let alice_text: Vec<u8> = (0..TEXT_SIZE).map(|i| b'A' + (i % 26) as u8).collect();
        let alice_text_sha = sha256_hex(&alice_text);
        let alice_tok = Some(alice_token.as_str());
        store(
            &server,
            alice_tok,
            "keep/a.txt",
            alice_text.clone(),
            &mut alice_files,
        )
        .await;
        store(
            &server,
            alice_tok,
            "keep/b.bin",
            random_bytes(10_240),
            &mut alice_files,
        )
        .await;
        for i in 0..16 {
            let path = format!("fill/{i:02}");
            store(
                &server,
                alice_tok,
                &path,
                // 18 files, each also charged an entry's overhead.
                random_bytes(64_000 - 18 * volume::ENTRY_OVERHEAD as usize / 16),
                &mut alice_files,
            )
            .await;
        }
        let mut root_files = BTreeMap::new();
        store(
            &server,
            Some(&root_token),
            "root-only.txt",
            random_bytes(2000),
            &mut root_files,
        )
        .await;
        let shared: serde_json::Value = server
            .client
            .post(server.url("/files/keep/a.txt?share"))
            .bearer_auth(&alice_token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let share = shared["token"].as_str().unwrap().to_owned();
        let (alice_cookie, alice_csrf) = login(&server, "alice", "pw-alice-123").await;
        let (root_cookie, root_csrf) = login(&server, "root", "pw-root-123").await;
        let settings = estimator_settings(&server, Some(&root_token)).await;

        let (alice_bearer, root_bearer) = (bearer(&alice_token), bearer(&root_token));
        let users = Phase {
            mode: Mode::Users,
            user: &alice_bearer,
            admin: &root_bearer,
            text_sha: &alice_text_sha,
        };
        let users_count = run(
            &server,
            &format!("{area}, users"),
            (self.both)(&users),
            &mut failures,
        )
        .await;
        let accounts = Accounts {
            alice: alice_token.clone(),
            root: root_token.clone(),
            alice_cookie: alice_cookie.clone(),
            alice_csrf,
            root_cookie,
            root_csrf,
            share: share.clone(),
        };
        let accounts_count = run(
            &server,
            &format!("{area}, accounts"),
            (self.accounts)(&accounts),
            &mut failures,
        )
        .await;
        let count = open_count + users_count + accounts_count;
        println!(
            "bad input, {area}: {count} cases ({open_count} open, {users_count} with users, {accounts_count} about accounts)"
        );

        // ---- Nothing written: every tree is what the test stored, the share
        // and the session survive, the settings are unchanged.
        same(
            "alice's tree",
            &tree(&server, alice_tok).await,
            &alice_files,
            &mut failures,
        );
        same(
            "root's tree",
            &tree(&server, Some(&root_token)).await,
            &root_files,
            &mut failures,
        );
        same(
            "the estimator settings (users)",
            &estimator_settings(&server, Some(&root_token)).await,
            &settings,
            &mut failures,
        );
        let via_share = server
            .client
            .get(server.url(&format!("/share/{share}")))
            .send()
            .await
            .unwrap();
        assert_eq!(via_share.status(), 200, "the share link still works");
        assert_eq!(via_share.bytes().await.unwrap(), alice_text);
        let session = server
            .client
            .get(server.url("/auth/session"))
            .header("cookie", format!("wst_session={alice_cookie}"))
            .send()
            .await
            .unwrap();
        assert_eq!(session.status(), 200, "alice's session survived");

        // Exactly the blobs of those files, and no temp file left.
        let wanted: BTreeSet<String> = open_files
            .values()
            .chain(alice_files.values())
            .chain(root_files.values())
            .cloned()
            .collect();
        let blob_names = || -> BTreeSet<String> { stored_blobs(&server.data_dir) };
        same(
            "the stored blobs",
            &as_map(settles(blob_names, &wanted).await),
            &as_map(wanted),
            &mut failures,
        );
        let temp_files = || -> BTreeSet<String> {
            std::fs::read_dir(server.data_dir.join("tmp"))
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        };
        same(
            "the temp files",
            &as_map(settles(temp_files, &BTreeSet::new()).await),
            &BTreeMap::new(),
            &mut failures,
        );

        assert!(
            failures.is_empty(),
            "{area}: {} of {count} cases failed:\n{}",
            failures.len(),
            failures.join("\n")
        );
        server.stop().await;
    }
}
