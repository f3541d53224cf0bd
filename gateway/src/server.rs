//! The listener: accepts connections up to a cap, serves each with hyper's
//! HTTP/1.1 under a header-read timeout, and shuts down within a bounded
//! grace. A hostile client (thousands of half-sent requests, idle
//! keep-alives) costs one connection slot each, and only for the timeout.
//!
//! An answer given before its request's body was read (401, 413, 503, …)
//! is followed by a lingering read, as nginx's lingering close: the rest of
//! the body is read and discarded for a bounded time, so a client still
//! sending gets to read the answer instead of a reset. When the connection
//! closes after that answer, our side of it is ended (FIN) as soon as the
//! answer is out, so a client that reads to the end need not wait for the
//! lingering read.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, Version, header};
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::rt::ReadBufCursor;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt as _;

/// Largest request head (line and headers) read.
const MAX_HEAD_BYTES: usize = 64 << 10;

/// Longest the rest of a body answered early is read and discarded
/// (nginx's `lingering_time`): time, not bytes, bounds what a client
/// that keeps sending costs.
const LINGERING_TIME: Duration = Duration::from_secs(30);

/// Longest a lingering read waits for the next bytes (nginx's
/// `lingering_timeout`): a client that stopped sending is let go.
const LINGERING_TIMEOUT: Duration = Duration::from_secs(5);

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
        let (lingering, bodies) = mpsc::unbounded_channel();
        let exchange = Arc::new(Exchange::default());
        let app = app.clone();
        let io = HalfClosing::new(stream, exchange.clone());
        let service = tower::service_fn(move |mut request: axum::http::Request<Incoming>| {
            request
                .extensions_mut()
                .insert(ConnectInfo::<SocketAddr>(remote));
            // hyper reads the next request only once the last answer is
            // written: the exchange is this request's alone.
            exchange.start();
            let last = closes_after(request.version(), request.headers());
            let handoff = Arc::new(Handoff::new(
                lingering.clone(),
                last.then(|| exchange.clone()),
            ));
            // A client that waits for `100 Continue` has sent no body: one
            // answered before it was read is not coming, and reading on
            // would take the client's next request for it.
            let awaits_continue = request
                .headers()
                .get(axum::http::header::EXPECT)
                .is_some_and(|value| value.as_bytes().eq_ignore_ascii_case(b"100-continue"))
                && !request.body().is_end_stream();
            let request =
                request.map(|body| Lingering::new(body, handoff.clone(), awaits_continue));
            let answer = app.clone().oneshot(request);
            let exchange = exchange.clone();
            async move {
                let mut response = answer.await;
                // hyper writes the head as soon as this future is ready,
                // before it polls the body again: a lingering read started
                // from here never makes it send `100 Continue` first.
                handoff.answered();
                // Answered before the client was invited to send its body:
                // it may send it yet, or (having read this) its next
                // request; which one comes cannot be told, so the
                // connection closes rather than take one for the other
                // (RFC 9110 10.1.1). hyper would otherwise read on for
                // the body and could eat the next request's first bytes.
                if awaits_continue
                    && !handoff.invited()
                    && let Ok(response) = &mut response
                {
                    response.headers_mut().insert(
                        header::CONNECTION,
                        axum::http::HeaderValue::from_static("close"),
                    );
                }
                response.map(|response| response.map(|body| Answer { body, exchange }))
            }
        });
        let connection = http.serve_connection(io, TowerToHyperService::new(service));
        let connection = graceful.watch(connection);
        // The lingering reads run in the connection's own task: they hold
        // its slot, and shutdown's abort ends them with it.
        connections.spawn(async move {
            let discarding = discard_bodies(bodies, remote);
            tokio::pin!(connection, discarding);
            let mut discarded_all = false;
            let ended = loop {
                tokio::select! {
                    ended = &mut connection => break ended,
                    () = &mut discarding, if !discarded_all => discarded_all = true,
                }
            };
            if let Err(error) = ended {
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

/// A request body that, dropped before its end, goes to its connection's
/// lingering read once the answer is out, instead of being dropped: hyper
/// closes the connection on a dropped unfinished body, and a client still
/// sending then gets a reset in place of the answer.
struct Lingering {
    body: Option<Incoming>,
    /// Read to its end, or failed: nothing left to discard.
    finished: bool,
    /// The request said `Expect: 100-continue`: until the body is first
    /// read, the client sends none of it.
    awaits_continue: bool,
    /// The body was read from at least once (so `100 Continue` went out).
    read_from: bool,
    handoff: Arc<Handoff>,
}

impl Lingering {
    fn new(body: Incoming, handoff: Arc<Handoff>, awaits_continue: bool) -> Self {
        Self {
            body: Some(body),
            finished: false,
            awaits_continue,
            read_from: false,
            handoff,
        }
    }
}

impl Body for Lingering {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if !self.read_from {
            self.read_from = true;
            self.handoff.invited.store(true, Ordering::Release);
        }
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.finished = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.finished || self.body.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint)
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        // A body never invited with `100 Continue` is not on its way:
        // dropped, hyper closes the connection as it always did.
        let invited = !self.awaits_continue || self.read_from;
        if let Some(body) = self.body.take()
            && invited
            && !self.finished
            && !body.is_end_stream()
        {
            self.handoff.park(body);
        }
    }
}

/// Where a request's unfinished body waits for the request's answer.
struct Handoff {
    state: Mutex<Parked>,
    /// The body was read from (so hyper sent `100 Continue`, if asked).
    invited: AtomicBool,
    lingering: mpsc::UnboundedSender<Incoming>,
    /// The connection's exchange when it closes after this request: a
    /// lingering read then ends our side once the answer is out.
    last: Option<Arc<Exchange>>,
}

struct Parked {
    answered: bool,
    body: Option<Incoming>,
}

impl Handoff {
    fn new(lingering: mpsc::UnboundedSender<Incoming>, last: Option<Arc<Exchange>>) -> Self {
        Self {
            state: Mutex::new(Parked {
                answered: false,
                body: None,
            }),
            invited: AtomicBool::new(false),
            lingering,
            last,
        }
    }

    /// Whether the request's body was read from.
    fn invited(&self) -> bool {
        self.invited.load(Ordering::Acquire)
    }

    fn linger(&self, body: Incoming) {
        if let Some(exchange) = &self.last {
            exchange.half_close.store(true, Ordering::Release);
        }
        // A connection already gone drops the body.
        let _ = self.lingering.send(body);
    }

    /// Keep `body` unread until the answer is out (reading it earlier would
    /// let hyper invite the client to send it with `100 Continue`); after,
    /// discard it at once. A body held past the answer by a task comes here
    /// late.
    fn park(&self, body: Incoming) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.answered {
            self.linger(body);
        } else {
            state.body = Some(body);
        }
    }

    fn answered(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.answered = true;
        if let Some(body) = state.body.take() {
            self.linger(body);
        }
    }
}

/// Read and discard, one after the other, the bodies of a connection's
/// requests that were answered early. One request at a time is read on an
/// HTTP/1.1 connection, so one body at a time comes here.
async fn discard_bodies(mut bodies: mpsc::UnboundedReceiver<Incoming>, remote: SocketAddr) {
    while let Some(body) = bodies.recv().await {
        let (bytes, ended) = discard(body).await;
        tracing::debug!(%remote, bytes, ended, "discarded the rest of a body answered early");
    }
}

/// Read `body` to its end, keeping nothing, for at most [`LINGERING_TIME`]
/// and [`LINGERING_TIMEOUT`] between reads. Read to its end, the connection
/// stays open for the next request; given up, the body is dropped and
/// hyper closes the connection.
async fn discard(mut body: Incoming) -> (u64, &'static str) {
    let give_up = Instant::now() + LINGERING_TIME;
    let mut bytes = 0;
    loop {
        let wait = (Instant::now() + LINGERING_TIMEOUT).min(give_up);
        match tokio::time::timeout_at(wait, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
            }
            Ok(None) => return (bytes, "read to its end"),
            Ok(Some(Err(_))) => return (bytes, "the client went away"),
            Err(_) => return (bytes, "gave up"),
        }
    }
}

/// Whether the connection closes after the answer to a request with this
/// version and these headers (RFC 9112 9.3).
fn closes_after(version: Version, headers: &HeaderMap) -> bool {
    let has = |token: &str| {
        headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|option| option.trim().eq_ignore_ascii_case(token))
    };
    has("close") || (version <= Version::HTTP_10 && !has("keep-alive"))
}

/// What the connection's writer knows of the request being answered.
#[derive(Debug, Default)]
struct Exchange {
    /// The rest of the body is being discarded and the connection closes
    /// after the answer.
    half_close: AtomicBool,
    /// hyper has taken the answer's last bytes.
    answered: AtomicBool,
}

impl Exchange {
    fn start(&self) {
        self.half_close.store(false, Ordering::Release);
        self.answered.store(false, Ordering::Release);
    }
}

/// An answer's body that tells the exchange when hyper has taken its end.
struct Answer {
    body: axum::body::Body,
    exchange: Arc<Exchange>,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.body.is_end_stream() {
            self.exchange.answered.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        // hyper asks first, and never polls a body that has ended already.
        let ended = self.body.is_end_stream();
        if ended {
            self.exchange.answered.store(true, Ordering::Release);
        }
        ended
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, which ends our side of it (FIN) at the first
/// flush after an answer on a connection that closes once the rest of its
/// body is discarded: a client that reads to the end then sees the end at
/// once, while its bytes still come in and are discarded.
struct HalfClosing {
    io: TokioIo<TcpStream>,
    exchange: Arc<Exchange>,
    write_closed: bool,
}

impl HalfClosing {
    fn new(stream: TcpStream, exchange: Arc<Exchange>) -> Self {
        Self {
            io: TokioIo::new(stream),
            exchange,
            write_closed: false,
        }
    }
}

impl hyper::rt::Read for HalfClosing {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for HalfClosing {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        // hyper flushes only once its buffer is empty: the answer is out.
        if !this.write_closed
            && this.exchange.half_close.load(Ordering::Acquire)
            && this.exchange.answered.load(Ordering::Acquire)
        {
            this.write_closed = true;
            return Pin::new(&mut this.io).poll_shutdown(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.write_closed {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(connection: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in connection {
            headers.append(
                header::CONNECTION,
                value.parse().unwrap_or_else(|_| unreachable!()),
            );
        }
        headers
    }

    #[test]
    fn the_connection_closes_when_the_request_says_so_or_is_http_1_0() {
        assert!(!closes_after(Version::HTTP_11, &headers(&[])));
        assert!(closes_after(Version::HTTP_11, &headers(&["close"])));
        assert!(closes_after(Version::HTTP_11, &headers(&["TE, Close"])));
        assert!(closes_after(
            Version::HTTP_11,
            &headers(&["keep-alive", "close"])
        ));
        assert!(!closes_after(Version::HTTP_11, &headers(&["upgrade"])));
        assert!(closes_after(Version::HTTP_10, &headers(&[])));
        assert!(!closes_after(Version::HTTP_10, &headers(&["Keep-Alive"])));
    }
}
