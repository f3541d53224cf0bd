//! The client programs the tests drive (tuspy, tus-js-client under Node,
//! boto3 and the other S3 clients): where they are, how to run them, and
//! what a client script reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The workspace root (this crate sits one level below it).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

/// `tests/tus/<name>`: the tus client scripts.
pub fn tus_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/tus")
        .join(name)
}

/// The virtualenv's Python, asserted to import `module` (PyPI's
/// `package`).
pub fn python_with(module: &str, package: &str) -> PathBuf {
    let python = testsupport::find_tool("python3").unwrap();
    let check = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{} has no {package}: run scripts/install-test-deps.sh\n{}",
        python.display(),
        String::from_utf8_lossy(&check.stderr)
    );
    python
}

/// Node's `node_modules` with tus-js-client.
pub fn node_modules() -> PathBuf {
    let modules = workspace().join(".tools/node/node_modules");
    assert!(
        modules.join("tus-js-client/package.json").is_file(),
        "no tus-js-client in {}: run scripts/install-test-deps.sh",
        modules.display()
    );
    modules
}

/// Node running `tests/tus/tus_js_upload.cjs`, tus-js-client on its
/// `NODE_PATH`: `mode` (`start` or `resume`) an upload of `file` to
/// `endpoint`, its URL kept in `storage`, in PATCHes of `chunk` bytes
/// (`default`: tus-js-client's own, no limit); `start` aborts it once
/// `abort_at` bytes are out.
pub fn tus_js_command(
    mode: &str,
    endpoint: &str,
    file: &Path,
    storage: &Path,
    chunk: &str,
    abort_at: usize,
) -> Command {
    let mut command = Command::new(testsupport::find_tool("node").unwrap());
    command
        .arg(tus_script("tus_js_upload.cjs"))
        .arg(mode)
        .arg(endpoint)
        .arg(file)
        .arg(storage)
        .arg(chunk)
        .arg(abort_at.to_string())
        .env("NODE_PATH", node_modules());
    command
}

/// What a client script printed (one JSON object), and how it ended.
#[derive(Debug)]
pub struct Report {
    pub success: bool,
    pub json: Value,
    pub stderr: String,
}

impl Report {
    pub fn of(what: &str, output: Output) -> Self {
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let json = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{what} printed no report ({e}; {}):\n{stdout}\n{stderr}",
                output.status
            )
        });
        Self {
            success: output.status.success(),
            json,
            stderr,
        }
    }

    pub fn u64(&self, key: &str) -> u64 {
        self.json[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key} in {}", self.json))
    }

    pub fn url(&self) -> String {
        self.json["url"].as_str().unwrap().to_owned()
    }

    /// Panics with everything known unless the run succeeded.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.success,
            "{what} failed: {}\n{}",
            self.json, self.stderr
        );
    }
}

/// A command with none of the caller's AWS settings or proxies: the S3
/// clients must see only what the test gives them (no CA bundle, profile
/// or config file).
pub fn clean(program: &Path) -> Command {
    let mut command = Command::new(program);
    for var in [
        "AWS_CA_BUNDLE",
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_ENDPOINT_URL",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "http_proxy",
        "https_proxy",
    ] {
        command.env_remove(var);
    }
    command.env("NO_PROXY", "127.0.0.1,localhost");
    command
}

/// Run `command` to completion off the runtime's threads (a server in
/// this process keeps serving), killing it after `limit`; it failing to
/// start or running longer panics.
pub async fn run(mut command: Command, limit: Duration) -> Output {
    let name = format!("{command:?}");
    tokio::task::spawn_blocking(move || {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("{name} did not start ({error}); is it installed?"));
        // Drain the pipes while waiting, so a chatty client never blocks.
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut stdout, &mut buf).unwrap();
            buf
        });
        let err = std::thread::spawn(move || {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut stderr, &mut buf).unwrap();
            buf
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > limit {
                child.kill().unwrap();
                child.wait().unwrap();
                panic!(
                    "{name} ran longer than {limit:?}:\n{}\n{}",
                    String::from_utf8_lossy(&out.join().unwrap()),
                    String::from_utf8_lossy(&err.join().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Output {
            status,
            stdout: out.join().unwrap(),
            stderr: err.join().unwrap(),
        }
    })
    .await
    .unwrap()
}
