//! ChromeDriver and a headless Chromium, for the tests that drive the web
//! page in a real browser.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// ChromeDriver on a free loopback port, killed on drop.
pub struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    pub async fn start() -> Self {
        for binary in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(binary).exists(),
                "{binary} is missing: install Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver), as .ci/run does"
            );
        }
        let port = testsupport::free_port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let give_up = Instant::now() + Duration::from_secs(20);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(Instant::now() < give_up, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// A headless Chromium with its profile in `profile`, saving downloads
    /// to `downloads` if given.
    pub async fn browser(&self, profile: &Path, downloads: Option<&Path>) -> Client {
        let mut capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--disable-quic", "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }
        });
        if let Some(downloads) = downloads {
            capabilities["goog:chromeOptions"]["prefs"] = json!({
                "download.default_directory": downloads.display().to_string(),
                "download.prompt_for_download": false,
            });
        }
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
