//! The storage request handler, compiled for `wasm32-wasip2` into a component.
//!
//! Every instance of this component is long-lived and serves one request at a
//! time. The logic (buffer bodies up to a window, hash every upload with
//! SHA-256 and BLAKE3, verify every download) is the `storage-handler` library; this
//! crate is the thin layer that exports it as the WIT `handler` interface and
//! gives it the imported `volume` and `body` interfaces as its
//! [`storage_handler::Host`]. Everything the handler buffers lives in this
//! instance's linear memory, which never shrinks: what the gateway's
//! estimator keeps in check. The hashes' inner loops run on the CPU
//! instructions the host lends through the `digest` import ([`Lent`]);
//! BLAKE3's tree merges run here, built with Wasm SIMD (the gateway's
//! build script enables `simd128`).
//!
//! The contract is `wit/storage.wit`; the gateway builds this crate with
//! `cargo build --target wasm32-wasip2` from its build script.

// `generate!` and `export!` expand to the canonical-ABI glue, which is unsafe
// by nature; the handler code below uses none of its own.
#![allow(unsafe_code)]

wit_bindgen::generate!({ world: "storage", path: "../wit" });

use std::cell::RefCell;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use exports::wasm_storage::storage::handler as wit_handler;
use storage_handler::digests::{ChainingValue, Digests};
use storage_handler::types as plain;
use storage_handler::{Handler, Put};
use wasm_storage::storage::body::{self as wit_body, Content, Response, Upload};
use wasm_storage::storage::digest;
use wasm_storage::storage::types as wit_types;
use wasm_storage::storage::volume;

storage_handler::wit_conversions!();

thread_local! {
    /// The handler's state between `fetch` and `send-body`.
    static HANDLER: RefCell<Handler<Content>> = RefCell::new(Handler::default());
}

struct StorageHandler;

impl wit_handler::Guest for StorageHandler {
    fn append(
        request: wit_handler::AppendRequest,
        body: &Upload,
    ) -> Result<Option<wit_types::FileMeta>, wit_handler::HandlerError> {
        run(storage_handler::append(&mut Imports, request.into(), body))
            .map(|stored| stored.map(Into::into))
            .map_err(Into::into)
    }

    fn fetch(
        request: wit_handler::FetchRequest,
    ) -> Result<wit_handler::Fetched, wit_handler::HandlerError> {
        HANDLER.with_borrow_mut(|handler| {
            run(handler.fetch(&mut Imports, request.into()))
                .map(Into::into)
                .map_err(Into::into)
        })
    }

    fn send_body(out: &Response) -> Result<(), wit_body::BodyError> {
        HANDLER
            .with_borrow_mut(|handler| run(handler.send_body(&mut Imports, out)))
            .map_err(Into::into)
    }

    fn delete(path: String) -> Result<(), wit_handler::HandlerError> {
        run(storage_handler::delete(&mut Imports, &path)).map_err(Into::into)
    }

    fn list(
        prefix: String,
        after: Option<String>,
        limit: u32,
    ) -> Result<wit_types::Listing, wit_handler::HandlerError> {
        run(storage_handler::list(
            &mut Imports,
            &prefix,
            after.as_deref(),
            limit,
        ))
        .map(Into::into)
        .map_err(Into::into)
    }
}

/// The hashes' inner loops, run by the host on the CPU's SHA and vector
/// instructions (the `digest` import): the bytes handed over are slices of
/// this instance's memory, and every state and comparison stays here.
struct Lent;

impl Digests for Lent {
    fn sha256_blocks(state: &mut [u32; 8], blocks: &[u8]) {
        let after = digest::sha256_blocks(state, blocks);
        state.copy_from_slice(&after);
    }

    fn blake3_group(index: u64, data: &[u8]) -> ChainingValue {
        digest::blake3_group(index, data)
            .try_into()
            .expect("the host gives 32 bytes")
    }

    fn blake3_one_group(data: &[u8]) -> [u8; 32] {
        digest::blake3_one_group(data)
            .try_into()
            .expect("the host gives 32 bytes")
    }
}

// The component's exports only exist in the wasm build; on the host this
// crate compiles for its lints.
#[cfg(target_arch = "wasm32")]
export!(StorageHandler);

/// The instance's imports, as the handler's host. Every call is synchronous
/// (the host may suspend the instance inside one, invisibly to it).
struct Imports;

impl storage_handler::Host for Imports {
    type Upload = Upload;
    type Content = Content;
    type Response = Response;
    type Digests = Lent;

    async fn read_upload(
        &mut self,
        upload: &Upload,
        max: u32,
    ) -> Result<Vec<u8>, plain::BodyError> {
        upload.read(max).map_err(Into::into)
    }

    async fn keep_outboard(
        &mut self,
        upload: &Upload,
        piece: &[u8],
    ) -> Result<(), plain::BodyError> {
        upload.keep_outboard(piece).map_err(Into::into)
    }

    async fn checkpoint(
        &mut self,
        upload: &Upload,
        state: &storage_handler::hashes::HashState,
    ) -> Result<(), plain::BodyError> {
        upload.checkpoint(&state.into()).map_err(Into::into)
    }

    async fn put(
        &mut self,
        path: &str,
        upload: &Upload,
        put: Put<'_>,
    ) -> Result<plain::FileMeta, plain::VolumeError> {
        volume::put(
            path,
            upload,
            put.sha256,
            put.blake3,
            put.content_type,
            put.overwrite,
        )
        .map(Into::into)
        .map_err(Into::into)
    }

    async fn stat(&mut self, path: &str) -> Result<plain::FileMeta, plain::VolumeError> {
        volume::stat(path).map(Into::into).map_err(Into::into)
    }

    async fn open(&mut self, path: &str) -> Result<(plain::FileMeta, Content), plain::VolumeError> {
        volume::open(path)
            .map(|(meta, content)| (meta.into(), content))
            .map_err(Into::into)
    }

    async fn read_content(
        &mut self,
        content: &Content,
        max: u32,
    ) -> Result<Vec<u8>, plain::BodyError> {
        content.read(max).map_err(Into::into)
    }

    async fn seek_content(
        &mut self,
        content: &Content,
        offset: u64,
    ) -> Result<(), plain::BodyError> {
        content.seek(offset).map_err(Into::into)
    }

    async fn outboard_len(&mut self, content: &Content) -> u64 {
        content.outboard_len()
    }

    async fn read_outboard(
        &mut self,
        content: &Content,
        pieces: &[(u64, u32)],
    ) -> Result<Vec<u8>, plain::BodyError> {
        content.read_outboard(pieces).map_err(Into::into)
    }

    async fn attach_outboard(&mut self, content: &Content, outboard: &[u8]) {
        content.attach_outboard(outboard);
    }

    async fn close_content(&mut self, content: Content) {
        drop(content);
    }

    async fn write(&mut self, out: &Response, chunk: &[u8]) -> Result<(), plain::BodyError> {
        out.write(chunk).map_err(Into::into)
    }

    async fn delete(&mut self, path: &str) -> Result<(), plain::VolumeError> {
        volume::delete(path).map_err(Into::into)
    }

    async fn list(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<plain::Listing, plain::VolumeError> {
        volume::list(prefix, after, limit)
            .map(Into::into)
            .map_err(Into::into)
    }
}

/// Run a handler future to its end. Every import is synchronous, so it never
/// waits: one poll finishes it.
fn run<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("the guest's imports are synchronous"),
    }
}
