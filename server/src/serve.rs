//! Serving one accepted connection: the TLS handshake, HTTP/1.1 or HTTP/2, the bounds on
//! slow and quiet clients, and the graceful close (on a quiet connection, an eviction at the
//! connection limit, or server stop). The accept loop in [`crate::net`] hands each connection
//! here.

use crate::connections::{Conn, Registry};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use std::sync::Arc;
use std::time::Duration;

/// Bounds on clients, so that slow, idle or numerous connections cannot exhaust the server.
#[derive(Debug, Clone)]
pub struct Connections {
    /// The most connections served at once (further ones wait in the listen backlog); also
    /// kept below the process's open-files limit.
    pub max: usize,
    /// How long a client may take to send a request's headers (slowloris), and the TLS
    /// handshake.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived.
    pub body_timeout: Duration,
    /// A connection on which nothing arrives for this long is closed (idle keep-alive).
    pub idle_timeout: Duration,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            max: 10_000,
            header_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// Serves one accepted connection (after the TLS handshake, when serving HTTPS) until it
/// ends, or until `closing` resolves: then the connection is shut down gracefully (HTTP/2's
/// GOAWAY, so a client never sends a request into a connection being closed; HTTP/1 closes
/// after the response under way), and cut off if it has not finished within the header
/// timeout.
pub(crate) async fn serve<S>(
    stream: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    limits: &Connections,
    watched: (&Arc<Conn>, &Arc<Registry>),
    svc: S,
    closing: impl std::future::Future<Output = &'static str>,
) where
    S: hyper::service::Service<
            hyper::Request<hyper::body::Incoming>,
            Response = axum::response::Response,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Every read and write notes the time; `closing` includes [`stalled`], which ends a
    // connection on which no byte moved for the idle timeout, over TLS and HTTP/2 too. A
    // timer reset on every read, and hyper's own header timer (which [`quiet_for`] makes
    // redundant), were about 8% of a point read's CPU in a perf profile of `strata-bench
    // --suite lean`.
    let stream = Box::pin(Watched {
        inner: stream,
        conn: Arc::clone(watched.0),
        registry: Arc::clone(watched.1),
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // No header timer: a request whose headers never complete has not begun, and
    // [`quiet_for`] closes a connection with no request under way after the header timeout.
    builder.http1().header_read_timeout(None);
    tokio::pin!(closing);
    let io: Box<dyn Io> = match acceptor {
        Some(acc) => {
            let tls = tokio::select! {
                tls = tokio::time::timeout(limits.header_timeout, acc.accept(stream)) => tls,
                _ = closing.as_mut() => return,
            };
            match tls {
                Ok(Ok(s)) => Box::new(s),
                Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                Err(_) => return tracing::debug!("TLS handshake timed out"),
            }
        }
        None => Box::new(stream),
    };
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(ParseErrors::new(io)), svc);
    tokio::pin!(conn);
    let why = tokio::select! {
        _ = conn.as_mut() => return,
        why = closing => why,
    };
    tracing::debug!(why, "closing a connection");
    conn.as_mut().graceful_shutdown();
    // Requests under way may finish; a peer that never lets go is cut off.
    let _ = tokio::time::timeout(limits.header_timeout, conn).await;
}

/// A connection's byte stream, plain or TLS.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Io for T {}

/// A connection whose HTTP/1 parse-error answers carry a Cosmos-shaped body. hyper answers a
/// request it cannot parse (two `Content-Length` headers, a bad header name, a header block
/// over its limit) itself, before any handler runs, with an empty body; every other error a
/// client gets has `code` and `message`, so this one is given them on its way out. hyper
/// writes that answer as one buffer (this stream does not take vectored writes), which is
/// recognised by its status line and empty length; no handler answers a 4xx without a body.
struct ParseErrors<T> {
    inner: T,
    /// The answer being written instead: its bytes, how many are written, and the length of
    /// hyper's buffer to report once all are.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<T> ParseErrors<T> {
    fn new(inner: T) -> Self {
        Self {
            inner,
            pending: None,
        }
    }
}

/// The Cosmos-shaped form of hyper's answer `head`, if it is one.
fn cosmos_shaped(head: &[u8]) -> Option<Vec<u8>> {
    const EMPTY: &str = "content-length: 0\r\n";
    let text = std::str::from_utf8(head).ok()?;
    if !text.ends_with("\r\n\r\n") || !text.contains(EMPTY) {
        return None;
    }
    let (code, message) = match text.split("\r\n").next()? {
        "HTTP/1.1 400 Bad Request" => ("BadRequest", "The request could not be parsed as HTTP/1.1: its request line or a header is malformed (for example two Content-Length headers, a header name with spaces, or a value with control characters)."),
        "HTTP/1.1 431 Request Header Fields Too Large" => ("RequestHeaderTooLarge", "The request's headers are too large."),
        "HTTP/1.1 414 URI Too Long" => ("RequestUriTooLong", "The request's URI is too long."),
        _ => return None,
    };
    let body = serde_json::json!({"code": code, "message": message}).to_string();
    let head = text.replacen(
        EMPTY,
        &format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ),
        1,
    );
    Some(format!("{head}{body}").into_bytes())
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for ParseErrors<T> {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for ParseErrors<T> {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        use std::task::Poll;
        let this = self.get_mut();
        if this.pending.is_none() {
            match buf
                .starts_with(b"HTTP/1.1 4")
                .then(|| cosmos_shaped(buf))
                .flatten()
            {
                Some(bytes) => this.pending = Some((bytes, 0, buf.len())),
                None => return std::pin::Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        while let Some((bytes, at, reported)) = this.pending.as_mut() {
            if *at == bytes.len() {
                let n = *reported;
                this.pending = None;
                return Poll::Ready(Ok(n));
            }
            match std::pin::Pin::new(&mut this.inner).poll_write(cx, &bytes[*at..]) {
                Poll::Ready(Ok(0)) => {
                    this.pending = None;
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => *at += n,
                Poll::Ready(Err(e)) => {
                    this.pending = None;
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(0))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A connection's socket that notes when bytes arrive or leave, for [`stalled`].
struct Watched {
    inner: tokio::net::TcpStream,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.conn.note_moved(this.registry.now_ms());
        }
        r
    }
}

impl Watched {
    /// Notes a write that sent bytes: a long answer a client is still reading is not a
    /// stalled connection.
    fn sent(
        &self,
        r: std::task::Poll<std::io::Result<usize>>,
    ) -> std::task::Poll<std::io::Result<usize>> {
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.conn.note_moved(self.registry.now_ms());
        }
        r
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = std::pin::Pin::new(&mut this.inner).poll_write(cx, buf);
        this.sent(r)
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let r = std::pin::Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.sent(r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// Resolves once no byte has arrived on the connection or left it for `limit` (its idle
/// timeout), whether or not a request is under way: a client that stops sending mid-request,
/// holds an HTTP/2 stream open without a byte, or stops reading an answer, lets its
/// connection go. Checked when the limit could next be reached, not on every read.
pub(crate) async fn stalled(conn: &Conn, registry: &Registry, limit: Duration) {
    let limit_ms = limit.as_millis() as u64;
    loop {
        let quiet = registry.now_ms().saturating_sub(conn.moved_at());
        if quiet >= limit_ms {
            return;
        }
        tokio::time::sleep(Duration::from_millis((limit_ms - quiet).max(10))).await;
    }
}

/// Resolves once the connection has gone `limit` with no request under way, since it opened
/// or since its last response was sent. hyper bounds an HTTP/1 connection's wait for the next
/// request's headers itself; over HTTP/2 a client could hold a connection for ever without
/// opening a stream (its PINGs reset the idle read timeout), or stall a header block that
/// never completes, so the same bound is kept here, whatever the protocol.
pub(crate) async fn quiet_for(conn: &Conn, registry: &Registry, opened_ms: u64, limit: Duration) {
    let limit_ms = limit.as_millis() as u64;
    loop {
        let quiet_ms = conn
            .quiet_since(opened_ms)
            .map(|since| registry.now_ms().saturating_sub(since));
        let wait = match quiet_ms {
            Some(q) if q >= limit_ms => return,
            Some(q) => limit_ms - q,
            None => limit_ms,
        };
        tokio::time::sleep(Duration::from_millis(wait.max(10))).await;
    }
}

/// What a listener answers with: this process's API, or (a process waiting for a shared
/// store) its forwarding front.
#[derive(Clone)]
pub(crate) enum Answering {
    Api(crate::api::App),
    Front(Arc<crate::follower::Front>),
}

impl Answering {
    async fn answer(
        &self,
        region: crate::api::RegionId,
        req: axum::http::Request<axum::body::Body>,
    ) -> axum::response::Response {
        match self {
            Answering::Api(app) => crate::api::answer(app, region, req).await,
            Answering::Front(front) => crate::follower::answer(front, region, req).await,
        }
    }
}

/// The API as a hyper service that notes when each request of a connection starts and ends
/// (so the accept loop knows which connections are idle), and which region it reached.
pub(crate) fn tracked(
    answering: Answering,
    region: usize,
    registry: &Arc<Registry>,
    activity: &Arc<Conn>,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = axum::response::Response,
    Error = std::convert::Infallible,
    Future = impl std::future::Future<
        Output = Result<axum::response::Response, std::convert::Infallible>,
    > + Send,
> + Clone
       + Send
       + 'static {
    let (registry, activity) = (Arc::clone(registry), Arc::clone(activity));
    hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        activity.begin();
        // The request ends when its answer's body has been sent (or dropped), not when the
        // handler returns: a large page still on its way is not an idle connection.
        let ends = Ends {
            registry: Arc::clone(&registry),
            activity: Arc::clone(&activity),
        };
        let answering = answering.clone();
        async move {
            let answer = answering
                .answer(crate::api::RegionId(region), req.map(axum::body::Body::new))
                .await;
            Ok(answer.map(|body| axum::body::Body::new(Tracked { body, _ends: ends })))
        }
    })
}

/// An answer's body that holds its request's [`Ends`] until it is sent or dropped, and tells
/// hyper its size: a body mapped frame by frame has no known length, and every answer then
/// went out in chunks, where the service (and the baseline) send a Content-Length.
struct Tracked {
    body: axum::body::Body,
    _ends: Ends,
}

impl hyper::body::Body for Tracked {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Marks a request ended when dropped (with its answer's body, or with the request if the
/// connection goes first).
struct Ends {
    registry: Arc<Registry>,
    activity: Arc<Conn>,
}

impl Drop for Ends {
    fn drop(&mut self) {
        self.activity.end(self.registry.now_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn a_connection_stalls_only_once_nothing_arrives_for_the_limit() {
        let registry = Registry::default();
        let (_, conn) = registry.add();
        let limit = Duration::from_millis(200);
        let started = Instant::now();
        // Bytes every 80 ms for 600 ms: never stalled meanwhile.
        let reading = async {
            for _ in 0..8 {
                tokio::time::sleep(Duration::from_millis(80)).await;
                conn.note_moved(registry.now_ms());
            }
        };
        tokio::select! {
            _ = stalled(&conn, &registry, limit) => panic!("stalled while bytes arrived"),
            _ = reading => {}
        }
        // Then nothing: stalled about `limit` after the last byte.
        let quiet = Instant::now();
        stalled(&conn, &registry, limit).await;
        let took = quiet.elapsed();
        assert!(
            took >= Duration::from_millis(150) && took < Duration::from_secs(2),
            "{took:?}"
        );
        assert!(started.elapsed() >= Duration::from_millis(800));
    }

    #[tokio::test]
    async fn a_watched_socket_notes_bytes_in_and_out() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = l.accept().await.unwrap();
        let registry = Arc::new(Registry::default());
        let (_, conn) = registry.add();
        let mut w = Watched {
            inner: server,
            conn: Arc::clone(&conn),
            registry: Arc::clone(&registry),
        };
        let opened = conn.moved_at();
        tokio::time::sleep(Duration::from_millis(50)).await;
        client.write_all(b"x").await.unwrap();
        let mut b = [0u8; 1];
        w.read_exact(&mut b).await.unwrap();
        let read = conn.moved_at();
        assert!(read >= opened + 50, "{opened} {read}");
        tokio::time::sleep(Duration::from_millis(50)).await;
        w.write_all(b"y").await.unwrap();
        assert!(conn.moved_at() >= read + 50, "{read} {}", conn.moved_at());
    }
}
