//! The handler compiled into the gateway (`--handler native`): a measuring
//! instrument, off by default.
//!
//! It runs the same `storage-handler` logic the guest component is built
//! from, against the same host functions of [`super::host`] (the same
//! staging, volume calls, pacing and resource table), only without Wasm: no
//! compiled-to-Wasm code, no copies across the canonical ABI, no fiber
//! switches. A benchmark that runs one gateway each way measures what Wasm
//! costs per request. What it gives up: the handler's buffers live on the
//! gateway's heap, so no linear memory grows, the memory limiter sees
//! nothing and the estimator never has a reason to replace an instance; and
//! a handler fault is the gateway's fault, with no sandbox around it.

use wasmtime::component::Resource;

use storage_handler::types as plain;
use storage_handler::{Handler, Put};

use super::bindings::exports::wasm_storage::storage::handler as wit_handler;
use super::bindings::wasm_storage::storage::body::{
    self as wit_body, HostContent, HostResponse, HostUpload,
};
use super::bindings::wasm_storage::storage::types as wit_types;
use super::bindings::wasm_storage::storage::volume::Host as _;
use super::host::{Content, HostState, ResponseSink};
use super::upload::Upload;

storage_handler::wit_conversions!();

/// One native "instance": the handler's state between `fetch` and
/// `send-body`. Its host is the store's [`HostState`], lent per call.
#[derive(Debug, Default)]
pub(super) struct NativeHandler {
    handler: Handler<Resource<Content>>,
}

impl NativeHandler {
    pub(super) async fn append(
        state: &mut HostState,
        request: wit_handler::AppendRequest,
        body: &Resource<Upload>,
    ) -> Result<Option<wit_types::FileMeta>, wit_handler::HandlerError> {
        storage_handler::append(&mut Native(state), request.into(), body)
            .await
            .map(|stored| stored.map(Into::into))
            .map_err(Into::into)
    }

    pub(super) async fn fetch(
        &mut self,
        state: &mut HostState,
        request: wit_handler::FetchRequest,
    ) -> Result<wit_handler::Fetched, wit_handler::HandlerError> {
        self.handler
            .fetch(&mut Native(state), request.into())
            .await
            .map(Into::into)
            .map_err(Into::into)
    }

    pub(super) async fn send_body(
        &mut self,
        state: &mut HostState,
        out: &Resource<ResponseSink>,
    ) -> Result<(), wit_body::BodyError> {
        self.handler
            .send_body(&mut Native(state), out)
            .await
            .map_err(Into::into)
    }

    pub(super) async fn delete(
        state: &mut HostState,
        path: &str,
    ) -> Result<(), wit_handler::HandlerError> {
        storage_handler::delete(&mut Native(state), path)
            .await
            .map_err(Into::into)
    }

    pub(super) async fn list(
        state: &mut HostState,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<wit_types::Listing, wit_handler::HandlerError> {
        storage_handler::list(&mut Native(state), prefix, after, limit)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }
}

/// The store's host functions, called directly.
struct Native<'a>(&'a mut HostState);

/// Another handle to the same table entry, as the guest's borrows are.
fn borrow<T: 'static>(resource: &Resource<T>) -> Resource<T> {
    Resource::new_borrow(resource.rep())
}

impl storage_handler::Host for Native<'_> {
    type Upload = Resource<Upload>;
    type Content = Resource<Content>;
    type Response = Resource<ResponseSink>;
    type Digests = storage_handler::digests::Local;

    async fn read_upload(
        &mut self,
        upload: &Resource<Upload>,
        max: u32,
    ) -> Result<Vec<u8>, plain::BodyError> {
        HostUpload::read(self.0, borrow(upload), max)
            .await
            .map_err(Into::into)
    }

    async fn keep_outboard(
        &mut self,
        upload: &Resource<Upload>,
        piece: &[u8],
    ) -> Result<(), plain::BodyError> {
        HostUpload::keep_outboard(self.0, borrow(upload), piece.to_vec())
            .await
            .map_err(Into::into)
    }

    async fn checkpoint(
        &mut self,
        upload: &Resource<Upload>,
        state: &storage_handler::hashes::HashState,
    ) -> Result<(), plain::BodyError> {
        HostUpload::checkpoint(self.0, borrow(upload), state.into())
            .await
            .map_err(Into::into)
    }

    async fn put(
        &mut self,
        path: &str,
        upload: &Resource<Upload>,
        put: Put<'_>,
    ) -> Result<plain::FileMeta, plain::VolumeError> {
        self.0
            .put(
                path.to_owned(),
                borrow(upload),
                put.sha256.to_owned(),
                put.blake3.to_owned(),
                put.content_type.to_owned(),
                put.overwrite,
            )
            .await
            .map(Into::into)
            .map_err(Into::into)
    }

    async fn stat(&mut self, path: &str) -> Result<plain::FileMeta, plain::VolumeError> {
        self.0
            .stat(path.to_owned())
            .await
            .map(Into::into)
            .map_err(Into::into)
    }

    async fn open(
        &mut self,
        path: &str,
    ) -> Result<(plain::FileMeta, Resource<Content>), plain::VolumeError> {
        self.0
            .open(path.to_owned())
            .await
            .map(|(meta, content)| (meta.into(), content))
            .map_err(Into::into)
    }

    async fn read_content(
        &mut self,
        content: &Resource<Content>,
        max: u32,
    ) -> Result<Vec<u8>, plain::BodyError> {
        HostContent::read(self.0, borrow(content), max)
            .await
            .map_err(Into::into)
    }

    async fn seek_content(
        &mut self,
        content: &Resource<Content>,
        offset: u64,
    ) -> Result<(), plain::BodyError> {
        HostContent::seek(self.0, borrow(content), offset)
            .await
            .map_err(Into::into)
    }

    async fn outboard_len(&mut self, content: &Resource<Content>) -> u64 {
        HostContent::outboard_len(self.0, borrow(content)).await
    }

    async fn read_outboard(
        &mut self,
        content: &Resource<Content>,
        pieces: &[(u64, u32)],
    ) -> Result<Vec<u8>, plain::BodyError> {
        HostContent::read_outboard(self.0, borrow(content), pieces.to_vec())
            .await
            .map_err(Into::into)
    }

    async fn attach_outboard(&mut self, content: &Resource<Content>, outboard: &[u8]) {
        HostContent::attach_outboard(self.0, borrow(content), outboard.to_vec()).await;
    }

    async fn close_content(&mut self, content: Resource<Content>) {
        // As the guest's drop of its handle does.
        let _ = HostContent::drop(self.0, content).await;
    }

    async fn write(
        &mut self,
        out: &Resource<ResponseSink>,
        chunk: &[u8],
    ) -> Result<(), plain::BodyError> {
        HostResponse::write(self.0, borrow(out), chunk.to_vec())
            .await
            .map_err(Into::into)
    }

    async fn delete(&mut self, path: &str) -> Result<(), plain::VolumeError> {
        self.0.delete(path.to_owned()).await.map_err(Into::into)
    }

    async fn list(
        &mut self,
        prefix: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<plain::Listing, plain::VolumeError> {
        self.0
            .list(prefix.to_owned(), after.map(str::to_owned), limit)
            .await
            .map(Into::into)
            .map_err(Into::into)
    }
}
