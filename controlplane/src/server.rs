//! The accept loop of both listeners: hyper's HTTP/1.1 connection with the bounds `axum::serve`
//! does not offer.
//!
//! - **Header-read timeout** (`api_header_read_timeout_seconds`): a client must send a whole
//!   request head within it, and a kept-alive connection must start its next request within it;
//!   otherwise the connection is closed. Without it, 200 connections that sent half a request
//!   each were held for as long as they stayed open.
//! - **Connection caps**: at most `api_max_connections_per_client` connections from one address
//!   and `api_max_connections` in all. A connection over a cap is answered `503`
//!   `too_many_connections` (with `Retry-After`) and closed, and counted.
//! - **Every answer in the error shape**: a request hyper refuses itself (a request line longer
//!   than it parses, 414; a head past its buffer, 431; bytes that are not HTTP, 400) never reaches
//!   the router. [`ShapedErrors`] sees hyper write that bare answer and writes the API's instead:
//!   the same status, a JSON body with `error` and `message`, and the security headers.

use crate::browser::security_headers;
use crate::per_client::{PerClient, Ticket};
use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;
use watchpost_proto::Config;

/// The largest request head read (request line and headers): 128 KiB, twice the longest request
/// line the HTTP library parses. hyper's own default let a 500 KB header through.
const MAX_HEAD_BYTES: usize = 128 << 10;

/// The bounds of one listener's connections.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionLimits {
    /// `api_header_read_timeout_seconds`.
    pub header_read_timeout: Duration,
    /// `api_max_connections_per_client`.
    pub per_client: usize,
    /// `api_max_connections`.
    pub total: usize,
}

impl ConnectionLimits {
    /// The limits `config` sets.
    pub fn from_config(config: &Config) -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(config.api_header_read_timeout_seconds),
            per_client: config.api_max_connections_per_client as usize,
            total: config.api_max_connections as usize,
        }
    }
}

/// What the accept loops count, for `/stats` and `/metrics`.
#[derive(Debug, Default)]
pub struct ConnectionCounters {
    /// Connections open now, both listeners.
    pub open: AtomicU64,
    /// Connections refused over `api_max_connections_per_client`.
    pub refused_per_client: AtomicU64,
    /// Connections refused over `api_max_connections`.
    pub refused_total: AtomicU64,
    /// Requests hyper refused before routing (414, 431, 400, header-read timeout answers),
    /// answered in the error shape.
    pub refused_malformed: AtomicU64,
}

/// A connection's place: its client's, and one in the open count; given back when it ends.
struct Slot {
    _client: Ticket,
    counters: Arc<ConnectionCounters>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves `app` on `listener` until `stop` turns true, then lets the open connections finish
/// their requests (the caller bounds how long).
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    counters: Arc<ConnectionCounters>,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<()> {
    // Open connections per client address, shared by this listener's connections.
    let open = Arc::new(PerClient::new(limits.per_client));
    let (done_tx, mut done_rx) = watch::channel(());
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                // A peer that reset before we accepted, or a descriptor limit hit for a moment:
                // the listener itself is fine.
                Err(e) => {
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => break,
        };
        let slot = match admit(&open, &counters, &limits, peer.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                tokio::spawn(refuse(stream, refusal));
                continue;
            }
        };
        let app = app.clone();
        let stop = stop.clone();
        let counters = Arc::clone(&counters);
        let done = done_tx.clone();
        tokio::spawn(async move {
            connection(stream, peer, app, limits, counters, stop).await;
            drop(slot);
            drop(done);
        });
    }
    drop(done_tx);
    // Every connection task holds a sender: this returns once the last one ended.
    let _ = done_rx.changed().await;
    Ok(())
}

/// Completes once `stop` turns true (the guard `wait_for` returns is not held across awaits).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Why a connection was refused.
enum Refusal {
    PerClient(usize),
    Total(usize),
}

/// A place for a connection from `client`, or why there is none. Called by the one accept loop
/// of a listener, one connection at a time, so the total cannot be passed between the check and
/// the count.
fn admit(
    open: &Arc<PerClient>,
    counters: &Arc<ConnectionCounters>,
    limits: &ConnectionLimits,
    client: IpAddr,
) -> Result<Slot, Refusal> {
    if counters.open.load(Ordering::Relaxed) as usize >= limits.total {
        counters.refused_total.fetch_add(1, Ordering::Relaxed);
        return Err(Refusal::Total(limits.total));
    }
    let Some(ticket) = open.enter(client) else {
        counters.refused_per_client.fetch_add(1, Ordering::Relaxed);
        return Err(Refusal::PerClient(open.max()));
    };
    counters.open.fetch_add(1, Ordering::Relaxed);
    Ok(Slot {
        _client: ticket,
        counters: Arc::clone(counters),
    })
}

/// Answers a refused connection `503` in the error shape and closes it, without reading its
/// request (a client over its cap does not get to cost a parse).
async fn refuse(mut stream: TcpStream, refusal: Refusal) {
    let message = match refusal {
        Refusal::PerClient(n) => format!(
            "this address has {n} connections open, api_max_connections_per_client; reuse them or retry shortly"
        ),
        Refusal::Total(n) => {
            format!("the service has {n} connections open, api_max_connections; retry shortly")
        }
    };
    let answer = shaped_answer(
        StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        &message,
        Some(1),
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), stream.write_all(&answer)).await;
    let _ = stream.shutdown().await;
}

/// One connection, HTTP/1.1 with upgrades (the WebSocket stream), until it ends, its header-read
/// timeout passes, or a stop lets its current request finish.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    counters: Arc<ConnectionCounters>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(ShapedErrors::new(stream, counters));
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            app.clone().oneshot(req.map(axum::body::Body::new))
        });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // A request head is read into this buffer: past it, 431. Bodies stream through it.
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    let conn = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        () = stopped(&mut stop) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = conn.await;
}

/// The API's own answer for a refusal before routing: status, JSON error body, security headers,
/// and `Connection: close`, as raw HTTP/1.1.
fn shaped_answer(
    status: StatusCode,
    code: &str,
    message: &str,
    retry_after: Option<u64>,
) -> Vec<u8> {
    let body = serde_json::to_vec(&watchpost_proto::ErrorBody::new(code, message))
        .unwrap_or_else(|_| b"{}".to_vec());
    let mut headers = HeaderMap::new();
    security_headers(&mut headers);
    let mut out = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    if let Some(s) = retry_after {
        out.extend_from_slice(format!("retry-after: {s}\r\n").as_bytes());
    }
    for (k, v) in &headers {
        out.extend_from_slice(k.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    out
}

/// A connection's stream that replaces the bare answers hyper writes for requests it refuses
/// itself with the API's error shape.
///
/// How one is told from the router's: the router's answers always carry the security headers
/// (every route and refusal goes through the layer that adds them); hyper's own are a status
/// line, `content-length: 0` and a date. A write that is a whole response head without
/// `x-content-type-options` and with an empty body is hyper's. After such an answer hyper closes
/// the connection, so the replacement is the connection's last write.
struct ShapedErrors {
    inner: TcpStream,
    /// The replacement being written, and how much of it is out.
    replacement: Option<(Vec<u8>, usize)>,
    counters: Arc<ConnectionCounters>,
    /// A request declared a `Content-Length` hyper cannot hold (the two largest u64 values):
    /// hyper answers those 431 as if the head were too large; the client is told 413.
    declared_beyond_u64: bool,
    /// The last bytes read, for a header split between two reads.
    carry: [u8; CARRY],
    carried: usize,
}

/// Bytes kept from one read to the next: a `Content-Length` header with its value and a little
/// white space.
const CARRY: usize = 48;

impl ShapedErrors {
    fn new(inner: TcpStream, counters: Arc<ConnectionCounters>) -> ShapedErrors {
        ShapedErrors {
            inner,
            replacement: None,
            counters,
            declared_beyond_u64: false,
            carry: [0; CARRY],
            carried: 0,
        }
    }

    /// Writes out what is left of the replacement.
    fn poll_replacement(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some((bytes, at)) = self.replacement.as_mut() {
            if *at >= bytes.len() {
                return Poll::Ready(Ok(()));
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*at..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()));
                }
                Poll::Ready(Ok(n)) => *at += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Whether `read` holds a `Content-Length` header of 2^64-2 or 2^64-1, values hyper refuses
/// with 431. Only these two: a shorter number is refused 413 by the body guard, a longer one 400
/// by hyper.
fn declares_beyond_u64(read: &[u8]) -> bool {
    const DIGITS: &[u8] = b"1844674407370955161";
    const NAME: &[u8] = b"content-length:";
    memchr::memmem::find_iter(read, DIGITS).any(|at| {
        let after = &read[at + DIGITS.len()..];
        let last_digit = matches!(after.first(), Some(b'4' | b'5'));
        let ends = !after.get(1).is_some_and(u8::is_ascii_digit);
        let before = read[..at].trim_ascii_end();
        last_digit
            && ends
            && before.len() >= NAME.len()
            && before[before.len() - NAME.len()..].eq_ignore_ascii_case(NAME)
    })
}

/// The API's answer in place of hyper's bare one, when `written` is hyper's.
/// `declared_beyond_u64` turns hyper's 431 for such a length into 413.
fn replacement_for(written: &[u8], declared_beyond_u64: bool) -> Option<Vec<u8>> {
    let head_end = written.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if head_end != written.len() || !written.starts_with(b"HTTP/1.") {
        return None;
    }
    let head = std::str::from_utf8(written).ok()?.to_ascii_lowercase();
    if head.contains("x-content-type-options") || !head.contains("content-length: 0") {
        return None;
    }
    let status: u16 = head.get(9..12)?.parse().ok()?;
    let status = StatusCode::from_u16(status).ok()?;
    if status == StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE && declared_beyond_u64 {
        return Some(shaped_answer(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the request declares a Content-Length beyond what any route accepts",
            None,
        ));
    }
    let (code, message) = match status {
        StatusCode::URI_TOO_LONG => (
            "uri_too_long",
            "the request line is longer than the server reads (about 64 KiB); send long filters in a body",
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "headers_too_large",
            "the request's headers are larger than the server reads",
        ),
        StatusCode::REQUEST_TIMEOUT => (
            "request_timeout",
            "the request's headers did not arrive within api_header_read_timeout_seconds",
        ),
        s if s.is_client_error() => ("bad_request", "the request is not valid HTTP/1.1"),
        _ => return None,
    };
    Some(shaped_answer(status, code, message, None))
}

impl AsyncRead for ShapedErrors {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.inner).poll_read(cx, buf);
        let new = &buf.filled()[before..];
        if !self.declared_beyond_u64 && !new.is_empty() {
            // Where the last read ended (its tail and this read's start), then this read.
            let mut seam = [0u8; 2 * CARRY];
            let head = new.len().min(CARRY);
            seam[..self.carried].copy_from_slice(&self.carry[..self.carried]);
            seam[self.carried..self.carried + head].copy_from_slice(&new[..head]);
            self.declared_beyond_u64 =
                declares_beyond_u64(&seam[..self.carried + head]) || declares_beyond_u64(new);
            // The carry becomes the last CARRY bytes of what was carried and this read.
            let keep = new.len().min(CARRY);
            let old = (CARRY - keep).min(self.carried);
            let carried = self.carried;
            self.carry.copy_within(carried - old..carried, 0);
            self.carry[old..old + keep].copy_from_slice(&new[new.len() - keep..]);
            self.carried = old + keep;
        }
        read
    }
}

impl AsyncWrite for ShapedErrors {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.replacement.is_none()
            && let Some(answer) = replacement_for(buf, self.declared_beyond_u64)
        {
            self.counters
                .refused_malformed
                .fetch_add(1, Ordering::Relaxed);
            self.replacement = Some((answer, 0));
        }
        if self.replacement.is_some() {
            // hyper's bytes are taken (and dropped); ours go out in their place.
            return match self.poll_replacement(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.len())),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            };
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.replacement.is_some() {
            match self.poll_replacement(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.replacement.is_some() {
            match self.poll_replacement(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    /// Vectored writes would split a response head over several buffers; one buffer per write
    /// keeps hyper's bare answers recognisable in a single write.
    fn is_write_vectored(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypers_bare_answers_are_replaced_and_the_routers_are_not() {
        let bare = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Fri, 27 Nov 2026 00:00:00 GMT\r\n\r\n";
        let shaped = String::from_utf8(replacement_for(bare, false).unwrap()).unwrap();
        assert!(
            shaped.starts_with("HTTP/1.1 414 URI Too Long\r\n"),
            "{shaped}"
        );
        assert!(
            shaped.contains("x-content-type-options: nosniff"),
            "{shaped}"
        );
        assert!(shaped.contains("connection: close"), "{shaped}");
        let body = shaped.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"], "uri_too_long");
        assert!(shaped.contains(&format!("content-length: {}", body.len())));

        let ours = b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\nx-content-type-options: nosniff\r\ncontent-length: 0\r\n\r\n";
        assert!(replacement_for(ours, false).is_none());
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 5\r\n\r\nhello";
        assert!(replacement_for(with_body, false).is_none());
        let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
        assert!(
            replacement_for(ok, false).is_none(),
            "only refusals are replaced"
        );
    }

    #[test]
    fn a_content_length_hyper_cannot_hold_is_answered_413_not_431() {
        let head = b"POST /api/v1/ingest HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551615\r\n\r\n";
        assert!(declares_beyond_u64(head));
        let lower = b"content-length:18446744073709551614\r\n";
        assert!(declares_beyond_u64(lower));
        assert!(!declares_beyond_u64(
            b"Content-Length: 18446744073709551613\r\n"
        ));
        assert!(!declares_beyond_u64(
            b"Content-Length: 184467440737095516150\r\n"
        ));
        assert!(!declares_beyond_u64(b"X-Id: 18446744073709551615\r\n"));

        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        let shaped = String::from_utf8(replacement_for(bare, true).unwrap()).unwrap();
        assert!(shaped.starts_with("HTTP/1.1 413 "), "{shaped}");
        assert!(shaped.contains("payload_too_large"), "{shaped}");
        let shaped = String::from_utf8(replacement_for(bare, false).unwrap()).unwrap();
        assert!(shaped.starts_with("HTTP/1.1 431 "), "{shaped}");
    }
}
