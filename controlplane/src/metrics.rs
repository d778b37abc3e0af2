//! What the API counts of itself, and the route layer that counts it; `GET /metrics`
//! (`routes::metrics`) exposes it with the data plane's counters.
//!
//! API requests are counted by a route layer keyed by the route's template
//! (`/api/v1/alerts/{alert_id}`), never by the raw path, so label sets stay bounded whatever
//! clients send.

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use watchpost_dataplane::Histogram;

/// Requests and latencies of one route and method.
#[derive(Default)]
pub(crate) struct RouteMetrics {
    /// Answers by status code.
    pub(crate) by_status: BTreeMap<u16, u64>,
    pub(crate) latency: Histogram,
}

/// What the API counts of itself.
#[derive(Default)]
pub struct ApiMetrics {
    /// Keyed by (method, route template). A lock per request is nothing next to a request's own
    /// cost, and the data plane never takes it.
    pub(crate) routes: Mutex<BTreeMap<(String, String), RouteMetrics>>,
    /// Scrapes served.
    pub(crate) scrapes: AtomicU64,
    /// Requests refused for their `Host` (421, [`crate::host`]), on every listener.
    pub refused_host: AtomicU64,
    /// OTLP log records accepted (`POST /v1/logs`, durable when counted).
    pub otlp_records: AtomicU64,
    /// The accept loops' connection counts and refusals.
    pub connections: Arc<crate::server::ConnectionCounters>,
}

/// The route layer that counts every routed request.
pub async fn track(State(api): State<Arc<ApiMetrics>>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_string();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let started = Instant::now();
    let resp = next.run(req).await;
    let ns = started.elapsed().as_nanos() as u64;
    let status = resp.status().as_u16();
    if let Ok(mut routes) = api.routes.lock() {
        let m = routes.entry((method, route)).or_default();
        *m.by_status.entry(status).or_default() += 1;
        m.latency.observe_ns(ns);
    }
    resp
}
