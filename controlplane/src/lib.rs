//! Watchpost's control plane: the HTTP API under `/api/v1`, on its own tokio runtime.
//!
//! It reads the data plane's atomic counters and the RocksDB store and never touches worker
//! state, so no request can slow ingestion beyond the CPU it uses. Every error has one JSON shape
//! ([`ApiError`]); routes are listed in one place, `router::ROUTES`, which both [`router()`]
//! and the OpenAPI document are built from.
//!
//! Modules are private; what the binary and the tests use is re-exported here, in one list.
#![deny(missing_docs)]

mod answer;
mod benign;
mod body;
mod browser;
mod dashboard;
mod error;
mod fanout;
mod host;
mod memory;
mod metrics;
mod openapi;
mod per_client;
mod query;
mod ratelimit;
mod reload;
mod router;
mod routes;
mod server;
mod service;
mod state;
mod times;
mod ws;

pub use body::{BodyCounters, BodyFault, BodyGuard, Reservation};
pub use dashboard::CSP;
pub use error::ApiError;
pub use hyper::Method;
pub use ratelimit::RateLimits;
pub use reload::{ReloadError, ReloadReport, Reloader};
pub use router::{probe_router, router};
pub use service::{ServiceError, run};
pub use state::{AppState, RateSampler};
use std::future::Future;
pub use watchpost_llm::rfc3339;
pub use watchpost_llm::{Llm, LlmError};
pub use watchpost_notify::{
    ChannelError, ChannelSnapshot, DeliveryError, Notifier, NotifyError, NotifySnapshot, TestResult,
};
pub use watchpost_outbound::{HttpClient, OutboundError, Reply, Trust};
pub use ws::{Hub, WsConfig};

/// Serves the API on `listener`, and the probes on `probes` when given, until `shutdown`
/// completes; then both finish their in-flight requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    probes: Option<tokio::net::TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    state.rates.spawn(state.stats.clone());
    state.ws.spawn();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_tx = std::sync::Arc::new(stop_tx);
    let on_signal = stop_tx.clone();
    tokio::spawn(async move {
        shutdown.await;
        let _ = on_signal.send(true);
    });
    let limits = server::ConnectionLimits::from_config(&state.config);
    let counters = std::sync::Arc::clone(&state.api_metrics.connections);
    let probe_server = probes.map(|l| {
        let app = probe_router(state.clone());
        let (counters, stop) = (std::sync::Arc::clone(&counters), stop_rx.clone());
        tokio::spawn(async move { server::serve(l, app, limits, counters, stop).await })
    });
    // The accept loop gives each request its peer address, which identifies the client for
    // rate limits.
    let served = server::serve(listener, router(state), limits, counters, stop_rx).await;
    // However the API server ended, the probes end with it; its error is the one reported.
    let _ = stop_tx.send(true);
    let probed = match probe_server {
        Some(p) => p.await.map_err(std::io::Error::other).and_then(|r| r),
        None => Ok(()),
    };
    served.and(probed)
}
