//! tus 1.0.0 by hand: requests to one gateway's `/uploads/` as one caller,
//! and the headers they carry. A test file adds the requests of its own
//! cases in an `impl Tus` block of its own.

use std::net::SocketAddr;

use base64::Engine as _;
use reqwest::header::{self, HeaderMap};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

pub const TUS_VERSION: &str = "1.0.0";
pub const OFFSET_STREAM: &str = "application/offset+octet-stream";

/// tus requests to one gateway as one caller.
pub struct Tus {
    pub base: String,
    pub client: reqwest::Client,
    pub auth: Option<String>,
}

impl Tus {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            auth: None,
        }
    }

    pub fn with_token(addr: SocketAddr, token: &str) -> Self {
        Self {
            auth: Some(format!("Bearer {token}")),
            ..Self::new(addr)
        }
    }

    pub fn endpoint(&self) -> String {
        format!("{}/uploads/", self.base)
    }

    /// A request without `Tus-Resumable`.
    pub fn bare(&self, method: Method, url: &str) -> RequestBuilder {
        let request = self.client.request(method, url);
        match &self.auth {
            Some(auth) => request.header(header::AUTHORIZATION, auth),
            None => request,
        }
    }

    pub fn request(&self, method: Method, url: &str) -> RequestBuilder {
        self.bare(method, url).header("Tus-Resumable", TUS_VERSION)
    }

    /// The upload URL in a 201's `Location`, made absolute.
    pub fn location(&self, answer: &Response) -> String {
        let location = header_str(answer.headers(), "location")
            .unwrap_or_else(|| panic!("a 201 without Location: {:?}", answer.headers()));
        if location.starts_with("http://") || location.starts_with("https://") {
            location.to_owned()
        } else {
            assert!(location.starts_with("/uploads/"), "Location {location}");
            format!("{}{location}", self.base)
        }
    }

    pub async fn head(&self, url: &str) -> Response {
        self.request(Method::HEAD, url).send().await.unwrap()
    }

    /// The server's offset for `url` (asserting the HEAD is a 200).
    pub async fn offset(&self, url: &str) -> usize {
        let answer = self.head(url).await;
        assert_eq!(answer.status(), StatusCode::OK, "HEAD {url}");
        header_usize(answer.headers(), "upload-offset")
    }

    /// `GET /files/<path>` as this caller.
    pub async fn file(&self, path: &str) -> Response {
        self.bare(Method::GET, &format!("{}/files/{path}", self.base))
            .send()
            .await
            .unwrap()
    }
}

/// `Upload-Metadata` of `pairs`: each key and its value in base64.
pub fn upload_metadata(pairs: &[(&str, &str)]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    pairs
        .iter()
        .map(|(key, value)| format!("{key} {}", b64.encode(value)))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|value| value.to_str().unwrap())
}

pub fn header_usize(headers: &HeaderMap, name: &str) -> usize {
    header_str(headers, name)
        .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
        .parse()
        .unwrap()
}
