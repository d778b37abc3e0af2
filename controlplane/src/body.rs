//! Request bodies, on every route: how long one may take, how fast it must come, how many one
//! client may send at once, and how much memory all of them may hold.
//!
//! The header-read timeout of the accept loop ends at the request head; before this layer, a
//! body had no deadline at all. Sixteen clients that sent half an ingest body and went silent
//! held every `api_ingest_max_in_flight` slot for as long as they stayed connected (every other
//! ingest got 503 `busy` for minutes), and 240 half-sent 16 MB rule uploads took 3.9 GB, against
//! a memory budget of 2.3 GB. So, before any handler runs:
//!
//! - a body declared longer than its route takes is refused at once, 413, before a byte of it is
//!   read (and before `Expect: 100-continue` is answered): 64 KiB for the API's JSON commands,
//!   1 MiB for a rule upload, `api_max_body_bytes` for `POST /ingest` and OTLP;
//! - one client address sends at most `api_max_bodies_per_client` bodies at once (429);
//! - a body takes twice the bytes that have arrived of it ([`HOLD_FACTOR`]) from one budget of
//!   `api_body_memory_mb`, in steps of [`RESERVE_STEP`] as they arrive, for as long as its
//!   request is served, and handlers take what splitting and decoding it costs from the same
//!   budget ([`BodyGuard::reserve`]); a body that does not fit is answered 503 `busy` with
//!   `Retry-After`, so what bodies hold is inside the memory budget `/stats` reports. Taken as
//!   bytes arrive rather than by the declared length, a body that trickles or stalls holds what
//!   it sent, not the 16 MiB it announced;
//! - the body must arrive within `api_body_read_timeout_seconds`, and over every [`RATE_WINDOW`]
//!   bring `api_body_min_bytes_per_second` on average (or the rest of the body): a body that
//!   stalls, even after a fast start, fails within two windows with 408 `body_timeout`, its
//!   memory and its slots are given back and the connection is closed.
//!
//! Every refusal is counted (`/stats` `api.bodies`, `watchpost_api_bodies_refused_total`).

use crate::error::ApiError;
use crate::per_client::{PerClient, Ticket};
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Body as HttpBody, Frame, SizeHint};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use watchpost_proto::Config;

/// The span over which `api_body_min_bytes_per_second` is measured: long enough for a client's
/// first packets and a TLS proxy's buffering, short enough that a body which sent most of itself
/// at once and then went silent gives its memory back within seconds, not at its deadline.
pub const RATE_WINDOW: Duration = Duration::from_secs(5);
/// A body is budgeted at twice what has arrived: its pieces and, for a moment, the one buffer
/// they are joined into.
pub const HOLD_FACTOR: u64 = 2;
/// How much more of a body is budgeted at a time as its bytes arrive (so the budget is touched
/// once per MiB, not per read).
pub const RESERVE_STEP: u64 = 1 << 20;
/// Largest body of the API's JSON commands (triage, feedback, exceptions, hunts, rule toggles):
/// the largest of them is a note of 4,096 characters.
pub const COMMAND_BODY_BYTES: u64 = 64 << 10;
/// Largest rule upload: the largest SigmaHQ rule is about 60 KB.
pub const RULE_BODY_BYTES: u64 = 1 << 20;
/// The budget's unit: permits are KiB, so a semaphore of `u32` permits covers 4 TiB.
const UNIT: u64 = 1024;

/// What the layer counts.
#[derive(Debug, Default)]
pub struct BodyCounters {
    /// Bodies declared (or found) longer than their route takes: 413.
    pub too_large: AtomicU64,
    /// Ingest and OTLP bodies carrying more than `api_ingest_max_events` events: 413.
    pub too_many_events: AtomicU64,
    /// Bodies refused because their client had `api_max_bodies_per_client` in flight: 429.
    pub per_client: AtomicU64,
    /// Bodies and their splitting refused for want of budget: 503 `busy`.
    pub busy: AtomicU64,
    /// Bodies that did not arrive in time or fast enough: 408.
    pub timed_out: AtomicU64,
}

/// The limits and the shared state of every route's bodies.
pub struct BodyGuard {
    max_body: u64,
    read_timeout: Duration,
    min_rate: u64,
    /// Bodies each client address has in flight (`api_max_bodies_per_client`).
    in_flight: Arc<PerClient>,
    memory: Arc<Semaphore>,
    memory_units: u64,
    /// What was refused.
    pub counters: BodyCounters,
}

impl BodyGuard {
    /// The guard `config` sets up.
    pub fn new(config: &Config) -> BodyGuard {
        let memory_units = (u64::from(config.api_body_memory_mb) << 20) / UNIT;
        BodyGuard {
            max_body: config.api_max_body_bytes,
            read_timeout: Duration::from_secs(config.api_body_read_timeout_seconds),
            min_rate: config.api_body_min_bytes_per_second,
            in_flight: Arc::new(PerClient::new(config.api_max_bodies_per_client as usize)),
            memory: Arc::new(Semaphore::new(
                usize::try_from(memory_units).unwrap_or(usize::MAX >> 4),
            )),
            memory_units,
            counters: BodyCounters::default(),
        }
    }

    /// The largest body `method` `path` takes.
    pub fn limit_of(&self, method: &Method, path: &str) -> u64 {
        match (method, path) {
            (&Method::POST, "/api/v1/ingest" | "/v1/logs") => self.max_body,
            (&Method::POST, "/api/v1/sigma/rules") => RULE_BODY_BYTES.min(self.max_body),
            _ => COMMAND_BODY_BYTES.min(self.max_body),
        }
    }

    /// Bytes of the budget in use now.
    pub fn in_use(&self) -> u64 {
        (self.memory_units - self.memory.available_permits() as u64) * UNIT
    }

    /// Takes `bytes` more of the budget for the request being served (what splitting or
    /// decoding its body costs), until the returned reservation is dropped; 503 `busy` when it
    /// does not fit now.
    pub fn reserve(&self, bytes: u64, what: &str) -> Result<Reservation, ApiError> {
        match self.take(bytes) {
            Some(permit) => Ok(Reservation { _permit: permit }),
            None => {
                self.counters.busy.fetch_add(1, Ordering::Relaxed);
                Err(busy(what, bytes))
            }
        }
    }

    /// `bytes` of the budget, if they are free now.
    fn take(&self, bytes: u64) -> Option<OwnedSemaphorePermit> {
        let units = bytes.div_ceil(UNIT).max(1);
        u32::try_from(units)
            .ok()
            .filter(|_| units <= self.memory_units)
            .and_then(|n| Arc::clone(&self.memory).try_acquire_many_owned(n).ok())
    }

    fn enter(&self, client: IpAddr) -> Option<Ticket> {
        self.in_flight.enter(client)
    }
}

fn busy(what: &str, bytes: u64) -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "busy",
        format!(
            "{what} ({} KiB) does not fit in the memory request bodies may hold now \
             (api_body_memory_mb); retry shortly",
            bytes.div_ceil(UNIT)
        ),
    )
    .retry_after(1)
}

/// The budget a request's body holds, grown by its body as bytes arrive and given back when the
/// request has been answered (the body itself is gone by then; the bytes read from it are not).
#[derive(Default)]
struct HeldMemory(Mutex<Option<OwnedSemaphorePermit>>);

impl HeldMemory {
    fn add(&self, more: OwnedSemaphorePermit) {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match held.as_mut() {
            Some(h) => h.merge(more),
            None => *held = Some(more),
        }
    }
}

/// Memory of the budget held for a request; given back when dropped.
#[must_use = "the memory is given back when this is dropped"]
pub struct Reservation {
    _permit: OwnedSemaphorePermit,
}

/// The layer: see the module's documentation.
pub async fn layer(State(guard): State<Arc<BodyGuard>>, req: Request, next: Next) -> Response {
    let declared = match declared_length(&req) {
        Ok(d) => d,
        Err(e) => return e.into_response(),
    };
    let Some(declared) = declared else {
        // No body.
        return next.run(req).await;
    };
    let limit = guard.limit_of(req.method(), req.uri().path());
    if declared.is_some_and(|n| n > limit) {
        guard.counters.too_large.fetch_add(1, Ordering::Relaxed);
        return too_large(limit).into_response();
    }
    let client = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
    let Some(slot) = guard.enter(client) else {
        guard.counters.per_client.fetch_add(1, Ordering::Relaxed);
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_bodies",
            format!(
                "this address is sending {} request bodies already, api_max_bodies_per_client; \
                 retry when one is done",
                guard.in_flight.max()
            ),
        )
        .retry_after(1)
        .into_response();
    };
    let expected = declared.unwrap_or(limit);
    let held = Arc::new(HeldMemory::default());
    let first = expected.min(RESERVE_STEP);
    match guard.take(first * HOLD_FACTOR) {
        Some(permit) => held.add(permit),
        None => {
            guard.counters.busy.fetch_add(1, Ordering::Relaxed);
            return busy("the request body", first * HOLD_FACTOR).into_response();
        }
    }
    let now = Instant::now();
    let timing = Timing {
        deadline: now + guard.read_timeout,
        started: now,
        min_rate: guard.min_rate,
        expected,
        limit,
    };
    let body = Budgeted {
        guard: Arc::clone(&guard),
        held: Arc::clone(&held),
        covered: first,
    };
    let req = req.map(move |b| Body::new(GuardedBody::new(b, timing, body)));
    let resp = next.run(req).await;
    drop((held, slot));
    resp
}

/// The body's declared length: `None` for no body, `Some(None)` for one of unknown length
/// (chunked). Two different lengths are refused (hyper refuses them first; kept for any path
/// that does not).
fn declared_length(req: &Request) -> Result<Option<Option<u64>>, ApiError> {
    let mut lengths = req.headers().get_all(header::CONTENT_LENGTH).iter();
    if let Some(first) = lengths.next() {
        let parse = |v: &axum::http::HeaderValue| v.to_str().ok()?.trim().parse::<u64>().ok();
        let Some(n) = parse(first) else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_content_length",
                "Content-Length is not a number of bytes",
            ));
        };
        if lengths.any(|v| parse(v) != Some(n)) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_content_length",
                "the request has two different Content-Length headers",
            ));
        }
        return Ok((n > 0).then_some(Some(n)));
    }
    Ok(req
        .headers()
        .contains_key(header::TRANSFER_ENCODING)
        .then_some(None))
}

fn too_large(limit: u64) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the body is larger than this route takes ({limit} bytes)"),
    )
    .with("limit", limit)
}

/// Why a guarded body stopped.
#[derive(Debug, thiserror::Error)]
pub enum BodyFault {
    /// More bytes arrived than the route takes.
    #[error("the body is larger than this route takes ({0} bytes)")]
    TooLarge(u64),
    /// It did not arrive in time, or fast enough.
    #[error("{0}")]
    Slow(String),
    /// What arrived of it does not fit in the bodies' memory budget now.
    #[error("the body does not fit in the memory request bodies may hold now (api_body_memory_mb)")]
    Busy(u64),
}

impl BodyFault {
    /// The answer to a request whose body failed so.
    pub fn answer(&self) -> ApiError {
        match self {
            BodyFault::TooLarge(limit) => too_large(*limit),
            BodyFault::Slow(why) => {
                ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", why.clone())
            }
            BodyFault::Busy(bytes) => busy("the request body", *bytes),
        }
    }
}

#[derive(Clone, Copy)]
struct Timing {
    deadline: Instant,
    started: Instant,
    min_rate: u64,
    /// The declared length, or the route's limit for a chunked body.
    expected: u64,
    /// The route's limit.
    limit: u64,
}

/// The budget a body draws on as it arrives.
struct Budgeted {
    guard: Arc<BodyGuard>,
    held: Arc<HeldMemory>,
    /// Bytes of body the held budget covers (it holds [`HOLD_FACTOR`] times as much).
    covered: u64,
}

/// A request body held to its route's length, its deadline, the minimum rate and the budget.
struct GuardedBody {
    inner: Body,
    received: u64,
    timing: Timing,
    budget: Budgeted,
    /// The rate's current window: when it began and what had arrived by then.
    window_start: Instant,
    window_received: u64,
    sleep: Pin<Box<Sleep>>,
    failed: bool,
}

impl GuardedBody {
    fn new(inner: Body, timing: Timing, budget: Budgeted) -> GuardedBody {
        GuardedBody {
            inner,
            received: 0,
            timing,
            budget,
            window_start: timing.started,
            window_received: 0,
            sleep: Box::pin(tokio::time::sleep_until(timing.deadline)),
            failed: false,
        }
    }

    /// Budgets what has arrived beyond what is covered, a step ahead; false when the budget
    /// cannot take it now.
    fn cover_received(&mut self) -> bool {
        let b = &mut self.budget;
        if self.received <= b.covered {
            return true;
        }
        let target = (b.covered + RESERVE_STEP)
            .min(self.timing.expected)
            .max(self.received);
        match b.guard.take((target - b.covered) * HOLD_FACTOR) {
            Some(more) => {
                b.held.add(more);
                b.covered = target;
                true
            }
            None => false,
        }
    }

    /// Whether the body fails now: past its deadline, or too little arrived over a rate window
    /// that has ended (which then starts the next window); otherwise when to look again.
    fn check(&mut self, now: Instant) -> Result<Instant, BodyFault> {
        let t = self.timing;
        if now >= t.deadline {
            return Err(BodyFault::Slow(format!(
                "the body did not arrive within {} s (api_body_read_timeout_seconds)",
                (t.deadline - t.started).as_secs()
            )));
        }
        if t.min_rate == 0 {
            return Ok(t.deadline);
        }
        let window_end = self.window_start + RATE_WINDOW;
        if now < window_end {
            return Ok(t.deadline.min(window_end));
        }
        let span = now - self.window_start;
        let arrived = self.received - self.window_received;
        let owed = (t.min_rate as f64 * span.as_secs_f64()) as u64;
        let rest = t.expected.saturating_sub(self.window_received);
        if arrived < owed.min(rest) {
            return Err(BodyFault::Slow(format!(
                "the body arrives slower than {} bytes a second \
                 (api_body_min_bytes_per_second): {arrived} bytes in the last {:.1} s",
                t.min_rate,
                span.as_secs_f64()
            )));
        }
        self.window_start = now;
        self.window_received = self.received;
        Ok(t.deadline.min(now + RATE_WINDOW))
    }

    fn fail(&mut self, fault: BodyFault) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.failed = true;
        let counters = &self.budget.guard.counters;
        match fault {
            BodyFault::Slow(_) => &counters.timed_out,
            BodyFault::TooLarge(_) => &counters.too_large,
            BodyFault::Busy(_) => &counters.busy,
        }
        .fetch_add(1, Ordering::Relaxed);
        Poll::Ready(Some(Err(axum::Error::new(fault))))
    }
}

impl HttpBody for GuardedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                    if this.received > this.timing.limit {
                        let limit = this.timing.limit;
                        return this.fail(BodyFault::TooLarge(limit));
                    }
                    if !this.cover_received() {
                        let bytes = this.received * HOLD_FACTOR;
                        return this.fail(BodyFault::Busy(bytes));
                    }
                }
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(other) => return Poll::Ready(other),
            Poll::Pending => {}
        }
        // Nothing new: is what arrived still enough? If not, the body fails; if so, wake up
        // when it is next to be looked at.
        loop {
            let due = match this.check(Instant::now()) {
                Ok(due) => due,
                Err(fault) => return this.fail(fault),
            };
            this.sleep.as_mut().reset(due);
            if this.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
