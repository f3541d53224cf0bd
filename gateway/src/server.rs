//! The listener: accepts connections up to a cap, serves each with hyper's
//! HTTP/1.1 under a header-read timeout, and shuts down within a bounded
//! grace. A hostile client (thousands of half-sent requests, idle
//! keep-alives) costs one connection slot each, and only for the timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::ServiceExt as _;

/// Largest request head (line and headers) read.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// How the listener treats connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest a request head may take, and a kept-alive connection may
    /// wait idle for its next request.
    pub header_timeout: Duration,
    pub max_connections: usize,
    /// Longest in-flight requests may take to finish after shutdown begins.
    pub shutdown_grace: Duration,
}

/// Serve `app` on `listener` until `shutdown` resolves; then stop
/// accepting, let in-flight requests finish for up to the grace, and close
/// whatever is still open.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut connections = JoinSet::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // A request head larger than this gets 431 (hyper's default is
        // its ~400 KiB buffer: far more than any real head).
        .max_header_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        while connections.try_join_next().is_some() {}
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors, or the peer gave up already:
                    // pause rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = app
            .clone()
            .map_request(move |mut request: axum::http::Request<Incoming>| {
                request
                    .extensions_mut()
                    .insert(ConnectInfo::<SocketAddr>(remote));
                request
            });
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        connections.spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, %remote, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    let open = connections.len();
    tracing::info!(connections = open, grace = ?limits.shutdown_grace, "no longer accepting; finishing in-flight requests");
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!(
                connections = connections.len(),
                "the shutdown grace is over: closing the connections still open"
            );
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}
