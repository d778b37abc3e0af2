//! The `Host` check in front of every listener: DNS-rebinding defence.
//!
//! Origin checks alone do not stop a page whose domain was rebound to 127.0.0.1: to the browser,
//! the service *is* that page's origin, so CORS and the Origin checks see a same-origin request.
//! Its `Host` header still carries the attacker's name, so a request is answered only when its
//! `Host` is one of the listener's own names ([`AllowedHosts`]); anything else gets 421
//! `host_not_allowed` (400 `host_missing` without a `Host`, 400 `host_duplicate` with two)
//! before any route runs, the WebSocket
//! upgrade and the dashboard included.
//! Refusals are counted (`/stats` `api.refused_host`, `watchpost_api_refused_host_total`).

use crate::error::ApiError;
use crate::metrics::ApiMetrics;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use watchpost_proto::AllowedHosts;

/// One listener's allowed names, and the API's counters that its refusals go to.
#[derive(Clone)]
pub struct HostGuard {
    allowed: Arc<AllowedHosts>,
    metrics: Arc<ApiMetrics>,
}

impl HostGuard {
    /// A guard for `allowed`, counting refusals in `metrics`.
    pub fn new(allowed: AllowedHosts, metrics: Arc<ApiMetrics>) -> HostGuard {
        HostGuard {
            allowed: Arc::new(allowed),
            metrics,
        }
    }
}

/// The layer: refuses a request whose `Host` is missing or not allowed.
pub async fn layer(State(guard): State<HostGuard>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|h| h.to_str().unwrap_or("(not text)"));
    let hosts = req.headers().get_all(header::HOST).iter().count();
    let refusal = match host {
        // RFC 9112, 3.2: a request with more than one Host is answered 400. Reading the first
        // would let a proxy that reads the last route it elsewhere than this check judged.
        _ if hosts > 1 => Some(ApiError::new(
            StatusCode::BAD_REQUEST,
            "host_duplicate",
            format!("the request has {hosts} Host headers; it must have one"),
        )),
        Some(h) if guard.allowed.allows(h) => None,
        Some(h) => Some(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            format!(
                "Host `{}` is not a name of this service: requests must name it by localhost, \
                 its address and port, or a name listed in api_allowed_hosts",
                h.chars().take(256).collect::<String>()
            ),
        )),
        // HTTP/1.1 requires Host (RFC 9112, 3.2); without one nothing says whom it was for.
        None => Some(ApiError::new(
            StatusCode::BAD_REQUEST,
            "host_missing",
            "the request has no Host header",
        )),
    };
    let Some(refusal) = refusal else {
        return next.run(req).await;
    };
    guard.metrics.refused_host.fetch_add(1, Ordering::Relaxed);
    let mut res = refusal.into_response();
    crate::browser::security_headers(res.headers_mut());
    res
}
